/**
 * Every JSON request and response example of the provider's cascade pages
 * (docs/api/cascade/index.md, send.md, variables.md, message-types.md in the smsbat/help
 * repository, commit bc0d1145b40b581c623d4f573054d17eecf108f6), run through the cascade
 * client (against a recording provider over real HTTP) and the sandbox (docs dialect, over
 * real HTTP). Each example is copied as the page shows it and cites its file and section.
 *
 * Filled in, as the docs leave them open:
 * - the placeholder `+380XXXXXXXXX` is `+380501234567`, a valid Ukrainian mobile number;
 *   send.md "Bulk Messages" writes +380111111111, +380222222222, +380333333333 to stand for
 *   three recipients, and the first two are no valid number (libphonenumber), so the three
 *   are +380501111111, +380502222222, +380503333333;
 * - a fragment (message-types.md's "Examples by Use Case", variables.md's "Use Cases" and
 *   "Step 2", index.md's "Message Scheduling" and "Time-to-Live") is completed with the
 *   fields of the full example of its section, said at each;
 * - the short links of variables.md's results (`https://sho.rt/...`) are the provider's
 *   shortener's own; the sandbox's are `shortUrl(value)`.
 */
import { randomUUID } from 'node:crypto';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.ts';
import {
  CASCADE_ITEMS_PATH,
  CASCADE_PATHS,
  createCascadeClient,
  parseCascadeResponse,
  type TypedCascadeVariable,
} from '../../src/provider/cascade.ts';
import { ProviderError } from '../../src/provider/http.ts';
import { shortUrl } from '../../src/sandbox/cascade.ts';
import { type Json, json, type Served, serveSandbox } from '../sandbox/helpers.ts';
import { type LocalServer, listen } from './helpers.ts';

const TO = '+380501234567';
const KEY = { 'X-Authorization-Key': 'sandbox-key' };

// ---------------------------------------------------------------------------------------
// The examples

interface Example {
  /** file and section */
  source: string;
  /** the request body as the endpoint takes it: a bare array, or index.md's {messages} */
  body: Json;
  /** variables uploaded first (variables.md "Step 1") */
  uploads?: TypedCascadeVariable[];
  /** the text as delivered, per message, where the page shows it or it follows plainly */
  delivered?: string[];
}

/** send.md "Message Types > Transaction Messages" */
const TRANSACTION = {
  id: 'order-12345',
  fromName: 'YourStore',
  toPhone: TO,
  messageType: 'transaction',
  text: 'Your order #12345 has been confirmed and will arrive tomorrow.',
  ttl: 86400,
} as const;

/** message-types.md "Transaction Messages > Example": completes that section's fragments */
const MT_TRANSACTION = {
  id: 'tx-order-12345',
  fromName: 'YourStore',
  toPhone: TO,
  messageType: 'transaction',
  text: 'Order #12345 confirmed. Total: $99.99. Delivery: Jan 25. Track: https://example.com/track/12345',
  ttl: 86400,
};

/** message-types.md "Promo Messages > Example": completes that section's fragments */
const MT_PROMO = {
  id: 'promo-summer-sale',
  fromName: 'YourBrand',
  toPhone: TO,
  messageType: 'promo',
  text: '🌟 Summer Sale! Up to 50% off on selected items. Shop now: https://example.com/sale',
  ttl: 259200,
};

/** message-types.md "Viber Survey > Example": completes that section's fragments */
const MT_SURVEY = {
  id: 'survey-satisfaction-001',
  fromName: 'YourBrand',
  toPhone: TO,
  messageType: 'viber_survey',
  text: 'How satisfied are you with our service?',
  surveyOptions: ['Very Satisfied', 'Satisfied', 'Neutral', 'Dissatisfied', 'Very Dissatisfied'],
  ttl: 604800,
};

/** message-types.md "Promo Messages > With Variables": the variables */
const WITH_VARIABLES = [
  { id: 1, type: 'name', value: 'John' },
  { id: 2, type: 'name', value: 'VIP20' },
  { id: 1, type: 'short_url', value: 'https://store.com/sale?utm=sms' },
] as const satisfies TypedCascadeVariable[];

/** variables.md "Step 2: Send Message with Variables": completes the "Use Cases" fragments */
const STEP2 = {
  id: 'msg-001',
  fromName: 'YourStore',
  toPhone: TO,
  messageType: 'transaction',
  text: 'Hello %name=1%! Your verification code is %name=2%. Visit: %short_url=4%',
};

/** message-types.md's fragments `{messageType, text[, surveyOptions]}`, completed by `full`. */
const complete = (full: Json, fragment: Json) => {
  const { ttl: _ttl, ...rest } = full;
  const { surveyOptions: _o, ...base } = rest;
  return [{ ...base, ...fragment }];
};

const REQUESTS: Example[] = [
  // ---- index.md
  {
    source: 'index.md "Request Example"',
    body: {
      messages: [
        {
          recipient: TO,
          text: 'Hello %name=1%, your order #%url=2% is ready!',
          variables: [
            { id: 1, value: 'John' },
            { id: 2, value: '12345' },
          ],
        },
      ],
    },
    delivered: ['Hello John, your order #12345 is ready!'],
  },
  {
    // a field alone: completed into the page's "Request Example", its only message form
    source: 'index.md "Key Features > Message Scheduling"',
    body: {
      messages: [
        {
          recipient: TO,
          text: 'Hello %name=1%, your order #%url=2% is ready!',
          variables: [
            { id: 1, value: 'John' },
            { id: 2, value: '12345' },
          ],
          scheduledTime: '2025-01-24T12:00:00Z',
        },
      ],
    },
    delivered: ['Hello John, your order #12345 is ready!'],
  },
  {
    // a field alone: completed as the one above
    source: 'index.md "Key Features > Time-to-Live (TTL)"',
    body: {
      messages: [
        {
          recipient: TO,
          text: 'Hello %name=1%, your order #%url=2% is ready!',
          variables: [
            { id: 1, value: 'John' },
            { id: 2, value: '12345' },
          ],
          ttl: 3600,
        },
      ],
    },
    delivered: ['Hello John, your order #12345 is ready!'],
  },
  // ---- send.md
  {
    source: 'send.md "Request Structure > Request Body"',
    body: [
      {
        id: 'unique-tracking-id',
        fromName: 'YourBrand',
        toPhone: TO,
        messageType: 'transaction',
        text: 'Your order #12345 has been confirmed',
        ttl: 3600,
        scheduledSent: '2025-01-25T10:00:00Z',
      },
    ],
  },
  { source: 'send.md "Message Types > Transaction Messages"', body: [TRANSACTION] },
  {
    source: 'send.md "Message Types > Promo Messages"',
    body: [
      {
        id: 'promo-summer-sale',
        fromName: 'YourBrand',
        toPhone: TO,
        messageType: 'promo',
        text: 'Summer Sale! Up to 50% off. Shop now: https://example.com/sale',
        ttl: 259200,
      },
    ],
  },
  {
    source: 'send.md "Message Types > Viber Survey"',
    body: [
      {
        id: 'survey-satisfaction',
        fromName: 'YourBrand',
        toPhone: TO,
        messageType: 'viber_survey',
        text: 'How satisfied are you with our service?',
        surveyOptions: [
          'Very Satisfied',
          'Satisfied',
          'Neutral',
          'Dissatisfied',
          'Very Dissatisfied',
        ],
        ttl: 604800,
      },
    ],
  },
  {
    source: 'send.md "Message Types > Flash Call"',
    body: [
      {
        id: 'verify-user-123',
        fromName: 'YourApp',
        toPhone: TO,
        messageType: 'flashcall',
        ttl: 300,
      },
    ],
  },
  {
    source: 'send.md "Examples > Basic Transaction" (curl -d)',
    body: [
      {
        id: 'tx-001',
        fromName: 'YourBank',
        toPhone: TO,
        messageType: 'transaction',
        text: 'Payment of $100 was successful. Transaction ID: ABC123',
      },
    ],
  },
  {
    source: 'send.md "Examples > Scheduled Promo" (curl -d)',
    body: [
      {
        id: 'promo-001',
        fromName: 'YourStore',
        toPhone: TO,
        messageType: 'promo',
        text: 'Flash Sale starts in 1 hour! Visit: https://example.com',
        scheduledSent: '2025-01-25T09:00:00Z',
        ttl: 3600,
      },
    ],
  },
  {
    source: 'send.md "Examples > Bulk Messages" (curl -d; recipients filled, see the top)',
    body: [
      {
        id: 'bulk-001',
        fromName: 'YourBrand',
        toPhone: '+380501111111',
        messageType: 'transaction',
        text: 'Message 1',
      },
      {
        id: 'bulk-002',
        fromName: 'YourBrand',
        toPhone: '+380502222222',
        messageType: 'transaction',
        text: 'Message 2',
      },
      {
        id: 'bulk-003',
        fromName: 'YourBrand',
        toPhone: '+380503333333',
        messageType: 'transaction',
        text: 'Message 3',
      },
    ],
  },
  {
    // the message the Python, JavaScript and PHP "Usage" blocks send (json=[message])
    source: 'send.md "Implementation Examples" (usage: send single message)',
    body: [
      {
        id: 'order-12345',
        fromName: 'YourStore',
        toPhone: TO,
        messageType: 'transaction',
        text: 'Your order has been confirmed',
        ttl: 86400,
      },
    ],
  },
  // ---- variables.md
  {
    // a message alone: wrapped in send.md's array; its variables are "Step 1"'s upload
    source: 'variables.md "Using Variables > Step 2: Send Message with Variables"',
    body: [STEP2],
    uploads: [
      { id: 1, type: 'name', value: 'John' },
      { id: 2, type: 'name', value: '12345' },
      { id: 3, type: 'url', value: 'https://example.com/products' },
      {
        id: 4,
        type: 'short_url',
        value: 'https://example.com/very-long-url-that-needs-shortening',
      },
    ],
    // "Result": Hello John! Your verification code is 12345. Visit: https://sho.rt/abc123
    delivered: [
      `Hello John! Your verification code is 12345. Visit: ${shortUrl('https://example.com/very-long-url-that-needs-shortening')}`,
    ],
  },
  {
    source: 'variables.md "Complete Example > Send Message" (curl -d, after its upload)',
    body: [
      {
        id: 'order-notification',
        fromName: 'YourStore',
        toPhone: TO,
        messageType: 'transaction',
        text: 'Hi %name=1%! Order %name=2% shipped. Track: %url=3%',
      },
    ],
    uploads: [
      { id: 1, type: 'name', value: 'Sarah' },
      { id: 2, type: 'name', value: 'ORD-789' },
      { id: 3, type: 'url', value: 'https://example.com/track/ORD-789' },
    ],
    // "Delivered Message"
    delivered: ['Hi Sarah! Order ORD-789 shipped. Track: https://example.com/track/ORD-789'],
  },
  {
    // "// Message" completed with Step 2's id, fromName, toPhone and messageType
    source: 'variables.md "Use Cases > Order Confirmation"',
    body: [
      { ...STEP2, text: 'Hi %name=1%! Order #%name=2% for %name=3% confirmed. Details: %url=4%' },
    ],
    uploads: [
      { id: 1, type: 'name', value: 'John' },
      { id: 2, type: 'name', value: '12345' },
      { id: 3, type: 'name', value: '$99.99' },
      { id: 4, type: 'url', value: 'https://store.com/order/12345' },
    ],
    delivered: [
      'Hi John! Order #12345 for $99.99 confirmed. Details: https://store.com/order/12345',
    ],
  },
  {
    source: 'variables.md "Use Cases > Password Reset" (completed as above)',
    body: [{ ...STEP2, text: 'Hi %name=1%, reset your password: %short_url=2% (valid 30 min)' }],
    uploads: [
      { id: 1, type: 'name', value: 'Mike' },
      {
        id: 2,
        type: 'short_url',
        value: 'https://app.example.com/reset?token=abc123def456',
      },
    ],
    delivered: [
      `Hi Mike, reset your password: ${shortUrl('https://app.example.com/reset?token=abc123def456')} (valid 30 min)`,
    ],
  },
  {
    source: 'variables.md "Use Cases > Promotional Campaign" (completed as above)',
    body: [{ ...STEP2, text: 'Summer Sale! Use code %name=1% for 20% off: %short_url=2%' }],
    uploads: [
      { id: 1, type: 'name', value: 'VIP20' },
      {
        id: 2,
        type: 'short_url',
        value: 'https://store.com/sale?utm_source=sms&utm_campaign=summer',
      },
    ],
    delivered: [
      `Summer Sale! Use code VIP20 for 20% off: ${shortUrl('https://store.com/sale?utm_source=sms&utm_campaign=summer')}`,
    ],
  },
  {
    source: 'variables.md "Use Cases > Account Verification" (completed as above)',
    body: [{ ...STEP2, text: 'Your verification code: %name=1%. Valid for %name=2% minutes.' }],
    uploads: [
      { id: 1, type: 'name', value: '789456' },
      { id: 2, type: 'name', value: '10' },
    ],
    delivered: ['Your verification code: 789456. Valid for 10 minutes.'],
  },
  {
    // the JavaScript usage's sendWithVariables: its variables uploaded, then the message
    source: 'variables.md "Implementation Examples > JavaScript (Node.js)" (usage)',
    body: [
      {
        id: 'order-notification',
        fromName: 'YourStore',
        toPhone: TO,
        messageType: 'transaction',
        text: 'Hi %name=1%! Order %name=2% shipped. Track: %url=3%',
      },
    ],
    uploads: [
      { id: 1, type: 'name', value: 'John' },
      { id: 2, type: 'name', value: 'ORD-12345' },
      { id: 3, type: 'url', value: 'https://example.com/track/ORD-12345' },
    ],
    delivered: ['Hi John! Order ORD-12345 shipped. Track: https://example.com/track/ORD-12345'],
  },
  // ---- message-types.md
  { source: 'message-types.md "Transaction Messages > Example"', body: [MT_TRANSACTION] },
  ...(
    [
      ['Order Confirmation', 'Order #12345 confirmed. Total: $99.99. Expected delivery: Jan 25.'],
      [
        'Payment Notification',
        'Payment of $150.00 to Merchant ABC successful. Transaction ID: TXN789. Balance: $850.00',
      ],
      [
        'Security Alert',
        "New login detected from iPhone at 10:30 AM. Location: New York. If this wasn't you, secure your account immediately.",
      ],
      [
        'Delivery Update',
        'Your package is out for delivery! Expected arrival: 2-4 PM. Track: https://track.example.com/PKG123',
      ],
    ] as const
  ).map(
    ([section, text]): Example => ({
      // {messageType, text} completed with the section's "Example" (id, fromName, toPhone)
      source: `message-types.md "Transaction Messages > Examples by Use Case > ${section}"`,
      body: complete(MT_TRANSACTION, { messageType: 'transaction', text }),
    }),
  ),
  { source: 'message-types.md "Promo Messages > Example"', body: [MT_PROMO] },
  {
    // {messageType, text, variables} completed with the section's "Example"
    source: 'message-types.md "Promo Messages > With Variables"',
    body: complete(MT_PROMO, {
      messageType: 'promo',
      text: 'Hi %name=1%! Exclusive offer: Use code %name=2% for 20% off. Shop: %short_url=1%',
      variables: WITH_VARIABLES,
    }),
    delivered: [
      `Hi John! Exclusive offer: Use code VIP20 for 20% off. Shop: ${shortUrl('https://store.com/sale?utm=sms')}`,
    ],
  },
  ...(
    [
      [
        'Product Launch',
        '🎉 NEW ARRIVAL: iPhone 15 Pro now available! Pre-order today and get free shipping. Visit: https://store.com/iphone15',
      ],
      [
        'Flash Sale',
        '⚡ FLASH SALE: 2 hours only! Extra 30% off everything. Use code: FLASH30. Shop now: https://store.com/flash',
      ],
      [
        'Event Invitation',
        "You're invited! VIP Shopping Event on Jan 25 at 6 PM. Exclusive deals + refreshments. RSVP: https://events.com/vip",
      ],
    ] as const
  ).map(
    ([section, text]): Example => ({
      source: `message-types.md "Promo Messages > Examples by Use Case > ${section}"`,
      body: complete(MT_PROMO, { messageType: 'promo', text }),
    }),
  ),
  {
    // the text names %name=1% and %short_url=1% but the fragment carries no variables: sent
    // after "With Variables"' values are uploaded (alone it is refused, see below)
    source: 'message-types.md "Promo Messages > Examples by Use Case > Abandoned Cart"',
    body: complete(MT_PROMO, {
      messageType: 'promo',
      text: 'Hi %name=1%! You left items in your cart. Complete purchase now and get 10% off with code CART10: %short_url=1%',
    }),
    uploads: [...WITH_VARIABLES],
    delivered: [
      `Hi John! You left items in your cart. Complete purchase now and get 10% off with code CART10: ${shortUrl('https://store.com/sale?utm=sms')}`,
    ],
  },
  { source: 'message-types.md "Viber Survey > Example"', body: [MT_SURVEY] },
  ...(
    [
      [
        'Customer Satisfaction (NPS)',
        'How likely are you to recommend us to a friend?',
        ['0 - Not at all', '1-6 - Unlikely', '7-8 - Likely', '9-10 - Very Likely'],
      ],
      [
        'Product Feedback',
        'How do you rate our new product?',
        ['⭐️ Excellent', '⭐️ Good', '⭐️ Average', '⭐️ Poor', '⭐️ Very Poor'],
      ],
      [
        'Service Quality',
        'Was your support experience helpful?',
        ['Yes, very helpful', 'Somewhat helpful', 'Not helpful'],
      ],
      [
        'Event Feedback',
        'Would you attend our events again?',
        ['Definitely yes', 'Probably yes', 'Not sure', 'Probably not', 'Definitely not'],
      ],
    ] as const
  ).map(
    ([section, text, surveyOptions]): Example => ({
      source: `message-types.md "Viber Survey > Examples by Use Case > ${section}"`,
      body: complete(MT_SURVEY, {
        messageType: 'viber_survey',
        text,
        surveyOptions: [...surveyOptions],
      }),
    }),
  ),
  {
    source: 'message-types.md "Flash Call > Example"',
    body: [
      {
        id: 'verify-user-12345',
        fromName: 'YourApp',
        toPhone: TO,
        messageType: 'flashcall',
        ttl: 300,
      },
    ],
  },
  {
    source: 'message-types.md "Flash Call > Example with Fallback"',
    body: [
      {
        id: 'verify-001',
        fromName: 'YourApp',
        toPhone: TO,
        messageType: 'flashcall',
        ttl: 300,
        fallback: { messageType: 'transaction', text: 'Your verification code: 123456' },
      },
    ],
  },
];

/** The uploads of the variables pages (variables.md), as the page shows each body. */
const UPLOADS: Array<{ source: string; body: { variables: TypedCascadeVariable[] } }> = [
  {
    source: 'variables.md "Using Variables > Step 1: Upload Variable Values"',
    body: { variables: REQUESTS.find((e) => e.source.includes('Step 2'))!.uploads! },
  },
  {
    source: 'variables.md "Complete Example > Upload Variables" (curl -d)',
    body: { variables: REQUESTS.find((e) => e.source.includes('Complete Example'))!.uploads! },
  },
  ...['Order Confirmation', 'Password Reset', 'Promotional Campaign', 'Account Verification'].map(
    (section) => ({
      source: `variables.md "Use Cases > ${section}" (// Variables)`,
      body: { variables: REQUESTS.find((e) => e.source.includes(section))!.uploads! },
    }),
  ),
];

/** send.md "Response > Success Response" and index.md "Response Format". */
const RESPONSES = [
  {
    source: 'send.md "Response > Success Response"',
    body: [
      { messageId: '3fa85f64-5717-4562-b3fc-2c963f66afa6', trackinId: 'tx-001' },
      { messageId: '8b2f1e9a-4c6d-4e2a-9f8b-1a3d5c7e9f0b', trackinId: 'tx-002' },
    ],
  },
  {
    source: 'index.md "Response Format"',
    body: [{ messageId: '3fa85f64-5717-4562-b3fc-2c963f66afa6', trackinId: 'tracking-string-id' }],
  },
];

/** send.md "Error Handling > Error Response" */
const ERROR_RESPONSE = {
  error: {
    code: 'INVALID_PHONE',
    message: 'Invalid phone number format',
    field: 'toPhone',
  },
};

const sentMessages = (body: Json): Json[] => (Array.isArray(body) ? body : body.messages);

// ---------------------------------------------------------------------------------------
// A provider that records what it is sent and answers as send.md shows

const servers: LocalServer[] = [];
let s: Served | undefined;
afterEach(async () => {
  await Promise.all(servers.splice(0).map((x) => x.close()));
  await s?.close();
  s = undefined;
});

async function provider(answer?: { status: number; body: unknown }) {
  const seen: Array<{ path: string; body: Json }> = [];
  const app = new Hono();
  app.post('*', async (c) => {
    const body = await c.req.json();
    seen.push({ path: c.req.path, body });
    if (answer) return c.json(answer.body, answer.status as 200);
    if (c.req.path === CASCADE_ITEMS_PATH) return c.json({});
    // send.md "Success Response": one {messageId, trackinId} per message, trackinId its id
    return c.json(
      sentMessages(body).map((m: Json) => ({ messageId: randomUUID(), trackinId: m.id ?? 'x' })),
    );
  });
  const server = await listen(app);
  servers.push(server);
  return { url: server.url, seen };
}

const post = (path: string, body: unknown, headers: Record<string, string> = KEY) =>
  fetch(`${s!.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

// ---------------------------------------------------------------------------------------

describe('the cascade client sends each documented request in the endpoint form', () => {
  it.each(REQUESTS.map((e) => [e.source, e] as const))('%s', async (_, e) => {
    const p = await provider();
    const client = createCascadeClient({
      baseUrl: p.url,
      auth: { apiKey: 'k' },
      fromName: 'YourStore',
    });
    if (e.uploads) await client.uploadVariables(e.uploads);
    const results = await client.send(e.body);
    const sends = p.seen.filter((r) => r.path === CASCADE_PATHS.general);
    expect(sends).toHaveLength(1);
    const wire = sends[0]!.body;
    // what is sent is send.md's bare array, one entry per message, in order
    expect(Array.isArray(wire)).toBe(true);
    expect(wire).toHaveLength(sentMessages(e.body).length);
    expect(results.map((r) => r.trackingId)).toEqual(wire.map((m: Json) => m.id));
    if (Array.isArray(e.body) && !e.body.some((m: Json) => m.variables)) {
      // the endpoint's own form goes out as it is (its variables, if any, uploaded before)
      expect(wire).toEqual(e.body);
      expect(p.seen.map((r) => r.path)).toEqual([
        ...(e.uploads ? [CASCADE_ITEMS_PATH] : []),
        CASCADE_PATHS.general,
      ]);
      if (e.uploads) expect(p.seen[0]!.body).toEqual({ variables: e.uploads });
    }
  });

  it('index.md "Request Example": mapped to the endpoint form, its variables uploaded typed', async () => {
    const p = await provider();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' }, fromName: 'Acme' });
    const e = REQUESTS[0]!;
    await client.send(e.body);
    expect(p.seen.map((r) => r.path)).toEqual([CASCADE_ITEMS_PATH, CASCADE_PATHS.general]);
    // each untyped variable takes the type of the placeholder naming it; this client's first
    // url variable id is 1, so %url=2% is sent as %url=1%
    expect(p.seen[0]!.body).toEqual({
      variables: [
        { id: 1, type: 'name', value: 'John' },
        { id: 1, type: 'url', value: '12345' },
      ],
    });
    expect(p.seen[1]!.body).toEqual([
      {
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        fromName: 'Acme',
        toPhone: TO,
        messageType: 'transaction',
        text: 'Hello %name=1%, your order #%url=1% is ready!',
      },
    ]);
  });

  it('index.md "Request Example" with no fromName configured goes out as it is', async () => {
    const p = await provider();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
    await client.send(REQUESTS[0]!.body);
    expect(p.seen.map((r) => [r.path, r.body])).toEqual([
      [CASCADE_PATHS.general, REQUESTS[0]!.body],
    ]);
  });

  it('index.md "Key Features > Message Scheduling": scheduledTime is sent as scheduledSent', async () => {
    const p = await provider();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' }, fromName: 'Acme' });
    await client.send(REQUESTS[1]!.body);
    expect(p.seen[1]!.body[0]).toMatchObject({ scheduledSent: '2025-01-24T12:00:00Z' });
    expect(p.seen[1]!.body[0]).not.toHaveProperty('scheduledTime');
  });

  it('message-types.md "Promo Messages > With Variables": uploaded first under the same ids, or kept inline on request', async () => {
    const e = REQUESTS.find((x) => x.source.includes('With Variables'))!;
    const { variables, ...message } = e.body[0];
    const p = await provider();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
    await client.send(e.body);
    expect(p.seen.map((r) => r.body)).toEqual([{ variables: WITH_VARIABLES }, [message]]);

    const q = await provider();
    const inline = createCascadeClient({ baseUrl: q.url, auth: { apiKey: 'k' } });
    await inline.send(e.body, { variables: 'inline' });
    expect(q.seen.map((r) => [r.path, r.body])).toEqual([[CASCADE_PATHS.general, e.body]]);
  });

  it('message-types.md "Abandoned Cart" alone is refused: its placeholders name no variable', async () => {
    const p = await provider();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
    const e = REQUESTS.find((x) => x.source.includes('Abandoned Cart'))!;
    const err = await client.send(e.body).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).details).toEqual([
      expect.objectContaining({ path: 'messages[0].text', code: 'UNKNOWN_VARIABLE' }),
      expect.objectContaining({ path: 'messages[0].text', code: 'UNKNOWN_VARIABLE' }),
    ]);
    expect((err as AppError).details[0]!.message).toContain('%name=1%');
    expect(p.seen).toHaveLength(0);
  });

  it.each(UPLOADS.map((u) => [u.source, u] as const))(
    'uploads %s as the page shows it',
    async (_, u) => {
      const p = await provider();
      const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
      await client.uploadVariables(u.body.variables);
      expect(p.seen).toEqual([{ path: '/api/items', body: u.body }]);
    },
  );

  it.each(RESPONSES.map((r) => [r.source, r] as const))('reads %s', async (_, r) => {
    const expected = r.body.map((x) => ({ messageId: x.messageId, trackingId: x.trackinId }));
    expect(parseCascadeResponse(r.body)).toEqual(expected);
    const p = await provider({ status: 200, body: r.body });
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
    expect(await client.send([TRANSACTION])).toEqual(expected);
  });

  it('send.md "Error Handling > Error Response" reaches the caller with its body', async () => {
    const p = await provider({ status: 400, body: ERROR_RESPONSE });
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
    const err = await client.send([TRANSACTION]).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ kind: 'bad_request', status: 400, body: ERROR_RESPONSE });
  });
});

describe('the sandbox (docs dialect) takes each documented request', () => {
  it.each(REQUESTS.map((e) => [e.source, e] as const))('%s', async (_, e) => {
    s = await serveSandbox({ dialect: 'docs' });
    if (e.uploads) {
      const up = await post('/api/items', { variables: e.uploads });
      expect(up.status).toBe(200);
    }
    const res = await post(CASCADE_PATHS.general, e.body);
    const answer = await json(res);
    expect(res.status, JSON.stringify(answer)).toBe(200);
    // send.md "Success Response": an array of {messageId, trackinId}, in order
    const sent = sentMessages(e.body);
    expect(answer).toEqual(
      sent.map((m) => ({
        messageId: expect.stringMatching(
          /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
        ),
        trackinId: m.id ?? expect.any(String),
      })),
    );
    answer.forEach((r: Json, i: number) => {
      const record = s!.sandbox.cascade.get(r.messageId)!;
      const m = sent[i];
      expect(record).toMatchObject({
        recipient: m.toPhone ?? m.recipient,
        messageType: m.messageType ?? 'transaction',
        fromName: m.fromName ?? null,
        text: e.delivered?.[i] ?? m.text ?? null,
      });
    });
  });

  it('message-types.md "Abandoned Cart" alone: a 400 naming the placeholder', async () => {
    s = await serveSandbox({ dialect: 'docs' });
    const e = REQUESTS.find((x) => x.source.includes('Abandoned Cart'))!;
    const res = await post(CASCADE_PATHS.general, e.body);
    expect(res.status).toBe(400);
    const body = await json(res);
    expect(body).toEqual({
      error: {
        code: 'UNKNOWN_VARIABLE',
        message: expect.stringContaining('%name=1%'),
        field: 'text',
      },
    });
  });

  it.each(UPLOADS.map((u) => [u.source, u] as const))('stores %s', async (_, u) => {
    s = await serveSandbox({ dialect: 'docs' });
    const res = await post('/api/items', u.body);
    expect(res.status).toBe(200);
    expect(s.sandbox.cascade.variables('api-key')).toEqual(u.body.variables);
  });

  it('answers as send.md "Success Response" and index.md "Response Format" show: the same fields', async () => {
    s = await serveSandbox({ dialect: 'docs' });
    const answer = await json(
      post(CASCADE_PATHS.general, REQUESTS.find((e) => e.source.includes('Bulk'))!.body),
    );
    for (const r of RESPONSES) {
      expect(answer.map((x: Json) => Object.keys(x).sort())).toEqual(
        answer.map(() => Object.keys(r.body[0]!).sort()),
      );
    }
  });

  it('answers a bad toPhone as send.md "Error Handling > Error Response" shows', async () => {
    s = await serveSandbox({ dialect: 'docs' });
    const res = await post(CASCADE_PATHS.general, [{ ...TRANSACTION, toPhone: '0501234567' }]);
    expect(res.status).toBe(400);
    const body = await json(res);
    expect(body).toEqual({
      error: { code: 'INVALID_PHONE', message: expect.any(String), field: 'toPhone' },
    });
    expect(Object.keys(body.error)).toEqual(Object.keys(ERROR_RESPONSE.error));
  });
});
