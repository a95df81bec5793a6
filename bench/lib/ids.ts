/**
 * The benches' message ids, one rule for TypeScript and SQL. Message `i` of the set `prefix`
 * has the customerMessageId `<16 hex digits of md5(prefix + i)>.<prefix><i>` and the
 * provider's id `pm-` + that. The hash in front puts them in random order, as clients' UUIDs
 * and the provider's GUIDs are, so a set's messages land all over the keys of
 * message_customer_ids and message_provider_ids (with the prefix in front a set would sit in a
 * few neighbouring pages, always in memory, whatever the table's size); the end still names
 * the set, for `like` (`benchIdPattern`).
 *
 * @example
 * benchCustomerId('a-', 7); // '98ed5c8fe88acbc0.a-7'
 * sql.unsafe(`select ${benchCustomerIdSql("'a-'", 'i')} from generate_series(1, 3) as i`);
 */
import { createHash } from 'node:crypto';

export function benchCustomerId(prefix: string, i: number): string {
  const key = `${prefix}${i}`;
  return `${createHash('md5').update(key).digest('hex').slice(0, 16)}.${key}`;
}

export function benchProviderId(prefix: string, i: number): string {
  return providerIdOf(benchCustomerId(prefix, i));
}

/** The provider's id of the bench message whose customerMessageId is `customerId`. */
export function providerIdOf(customerId: string): string {
  return `pm-${customerId}`;
}

/** `benchCustomerId` in SQL, of two SQL expressions (a text and an integer). */
export function benchCustomerIdSql(prefix: string, i: string): string {
  return `(substr(md5(${prefix} || ${i}), 1, 16) || '.' || ${prefix} || ${i})`;
}

/** `benchProviderId` in SQL. */
export function benchProviderIdSql(prefix: string, i: string): string {
  return `('pm-' || ${benchCustomerIdSql(prefix, i)})`;
}

/** Whether `id` is a customerMessageId of the set `prefix`. */
export function benchIdInSet(id: string | null | undefined, prefix: string): boolean {
  return id?.includes(`.${prefix}`) === true;
}

/** A `like` pattern for the customerMessageIds of the set `prefix` (prefixes end in `-`). */
export function benchIdPattern(prefix: string): string {
  return `%.${prefix}%`;
}
