import { defineConfig } from 'drizzle-kit';

// `npm run db:generate` writes a new SQL migration into migrations/ from src/db/schema.
// Migrations are committed and applied by code at start (src/db/migrate.ts), never pushed.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/schema/index.ts',
  out: './migrations',
});
