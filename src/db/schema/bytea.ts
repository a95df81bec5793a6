import { customType } from 'drizzle-orm/pg-core';

/** Raw bytes (Postgres `bytea`), read and written as a Uint8Array. */
export const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({
  dataType: () => 'bytea',
  // a Buffer for postgres.js (it sends Buffers as bytea); PGlite takes it as a Uint8Array
  toDriver: (value) => Buffer.from(value.buffer, value.byteOffset, value.byteLength),
  fromDriver: (value) => new Uint8Array(value),
});
