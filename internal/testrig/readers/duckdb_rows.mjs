// duckdb_rows.mjs PATH — every row of a Parquet file as JSON lines, read by
// DuckDB (npm @duckdb/node-api, installed by scripts/setup-readers.sh).
// PATH is a file, a glob, or a directory (read as DIR/*.parquet, files in
// name order). First line: {"schema": [{"name", "type"}, ...]} from DESCRIBE
// (DuckDB's type names: INTEGER[], UTINYINT[], VARCHAR, BIGINT, ...); then one
// object per row, column name -> value: lists as arrays, strings as strings,
// integers as numbers (decimal strings past 2^53), BLOBs as base64, NULL as null.
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { fail, jsonValue, Lines, load } from './readers_lib.mjs';

let path = process.argv[2];
if (!path || process.argv.length > 3) fail('usage: duckdb_rows.mjs PATH');
try {
  if (statSync(path).isDirectory()) path = join(path, '*.parquet');
} catch {
  // not a file or directory: a glob, or missing (DuckDB says which)
}

const { DuckDBInstance } = load('@duckdb/node-api');
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
const out = new Lines();
try {
  const desc = await conn.runAndReadAll('DESCRIBE SELECT * FROM read_parquet(?)', [path]);
  const schema = desc.getRowObjectsJS().map((r) => ({ name: r.column_name, type: r.column_type }));
  out.add({ schema });
  const result = await conn.stream('SELECT * FROM read_parquet(?)', [path]);
  for await (const rows of result.yieldRowObjectJs()) {
    for (const row of rows) out.add(jsonValue(row));
  }
} catch (err) {
  out.flush();
  fail(`${path}: ${err.message}`);
}
out.flush();
conn.closeSync();
instance.closeSync();
