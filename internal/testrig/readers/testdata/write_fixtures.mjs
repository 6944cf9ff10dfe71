// write_fixtures.mjs ROWS.json OUT.parquet OUT.arrow — writes the rows of
// ROWS.json ({"rows": [{"id", "input_ids", "loss_mask", "text", "n"}]}, n as a
// decimal string) as a Parquet file with DuckDB's own writer (COPY ... TO,
// zstd) and as an Arrow IPC file with apache-arrow's tableToIPC(..., 'file'),
// so that readers_test.go checks the readers on files our writer did not make.
// Columns: id VARCHAR/Utf8, input_ids INTEGER[]/List<Int32>,
// loss_mask UTINYINT[]/List<Uint8>, text VARCHAR/Utf8 (nullable), n BIGINT/Int64.
import { readFileSync, writeFileSync } from 'node:fs';
import { fail, load } from '../readers_lib.mjs';

const [specPath, parquetPath, arrowPath] = process.argv.slice(2);
if (!arrowPath) fail('usage: write_fixtures.mjs ROWS.json OUT.parquet OUT.arrow');
const { rows } = JSON.parse(readFileSync(specPath, 'utf8'));

// Parquet, by DuckDB.
const duck = load('@duckdb/node-api');
const { BIGINT, INTEGER, LIST, UTINYINT, VARCHAR, listValue } = duck;
const instance = await duck.DuckDBInstance.create(':memory:');
const conn = await instance.connect();
await conn.run('CREATE TABLE t (seq INTEGER, id VARCHAR, input_ids INTEGER[], loss_mask UTINYINT[], text VARCHAR, n BIGINT)');
const insert = await conn.prepare('INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6)');
for (const [i, r] of rows.entries()) {
  insert.bind(
    [i, r.id, listValue(r.input_ids), listValue(r.loss_mask), r.text, BigInt(r.n)],
    [INTEGER, VARCHAR, LIST(INTEGER), LIST(UTINYINT), VARCHAR, BIGINT],
  );
  await insert.run();
}
const quoted = parquetPath.replaceAll("'", "''");
await conn.run(`COPY (SELECT id, input_ids, loss_mask, text, n FROM t ORDER BY seq) TO '${quoted}' (FORMAT parquet, COMPRESSION zstd)`);
conn.closeSync();
instance.closeSync();

// Arrow IPC file, by apache-arrow.
const arrow = load('apache-arrow');
const { Field, Int32, Int64, List, Table, Uint8, Utf8, tableToIPC, vectorFromArray } = arrow;
const listOf = (t) => new List(new Field('item', t, true));
const table = new Table({
  id: vectorFromArray(rows.map((r) => r.id), new Utf8()),
  input_ids: vectorFromArray(rows.map((r) => r.input_ids), listOf(new Int32())),
  loss_mask: vectorFromArray(rows.map((r) => r.loss_mask), listOf(new Uint8())),
  text: vectorFromArray(rows.map((r) => r.text), new Utf8()),
  n: vectorFromArray(rows.map((r) => BigInt(r.n)), new Int64()),
});
writeFileSync(arrowPath, tableToIPC(table, 'file'));
