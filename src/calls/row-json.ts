/**
 * Rows that a statement returns as JSON (`to_json`, `json_agg`: snake_case keys, timestamps
 * as ISO text) back as drizzle's rows, by the table's own columns: the column list, names and
 * value types come from the schema, never written out again here.
 */
import { type Column, getTableColumns, type InferSelectModel, type Table } from 'drizzle-orm';

export type RowJson = Record<string, unknown>;

/** A mapper from a table's JSON rows to its select model (built once per table). */
export function jsonRowMapper<T extends Table>(table: T): (json: RowJson) => InferSelectModel<T> {
  const columns: [string, Column][] = Object.entries(getTableColumns(table));
  return (json) => {
    const row: Record<string, unknown> = {};
    for (const [key, column] of columns) {
      const value = json[column.name];
      // drizzle's own driver mapping: text dates to Date, bigint text to number, ...
      row[key] = value === null || value === undefined ? null : column.mapFromDriverValue(value);
    }
    return row as InferSelectModel<T>;
  };
}
