// arrow_rows.mjs PATH — every row of an Arrow IPC file as JSON lines, read by
// npm apache-arrow (installed by scripts/setup-readers.sh) with
// tableFromIPC(readFileSync(PATH)). First line: {"schema": [{"name", "type"},
// ...]} with apache-arrow's type strings (List<Int32>, List<Uint8>, Utf8,
// Int64, ...); then one object per row, column name -> value: lists (typed
// arrays) as plain arrays, strings as strings, integers as numbers (decimal
// strings past 2^53), binary as base64, null as null.
// It refuses an IPC stream: the shards are IPC files (magic "ARROW1").
import { readFileSync } from 'node:fs';
import { fail, jsonValue, Lines, load } from './readers_lib.mjs';

const path = process.argv[2];
if (!path || process.argv.length > 3) fail('usage: arrow_rows.mjs PATH');
const arrow = load('apache-arrow');
const { DataType, tableFromIPC } = arrow;

let bytes;
try {
  bytes = readFileSync(path);
} catch (err) {
  fail(err.message);
}
const magic = Buffer.from('ARROW1');
if (bytes.length < 12 || !bytes.subarray(0, 6).equals(magic) || !bytes.subarray(bytes.length - 6).equals(magic)) {
  fail(`${path}: not an Arrow IPC file (no ARROW1 magic at both ends)`);
}
let table;
try {
  table = tableFromIPC(bytes);
} catch (err) {
  fail(`${path}: ${err.message}`);
}

// value turns one value of an Arrow vector of type `type` into JSON.
function value(v, type) {
  if (v === null || v === undefined) return null;
  if (DataType.isList(type) || DataType.isFixedSizeList(type) || DataType.isLargeList?.(type)) {
    const child = type.children[0].type;
    if (v.nullCount === 0 && (DataType.isInt(child) || DataType.isFloat(child))) {
      return Array.from(v.toArray(), (x) => jsonValue(x)); // typed array -> plain array
    }
    return Array.from({ length: v.length }, (_, i) => value(v.get(i), child));
  }
  if (DataType.isStruct(type)) {
    const o = {};
    for (const f of type.children) o[f.name] = value(v[f.name], f.type);
    return o;
  }
  if (DataType.isDictionary(type)) return value(v, type.dictionary);
  if (v && typeof v.toJSON === 'function' && !(v instanceof Date)) return jsonValue(v.toJSON());
  return jsonValue(v);
}

const out = new Lines();
const fields = table.schema.fields;
out.add({ schema: fields.map((f) => ({ name: f.name, type: String(f.type) })) });
const columns = fields.map((_, i) => table.getChildAt(i));
for (let r = 0; r < table.numRows; r++) {
  const row = {};
  fields.forEach((f, i) => { row[f.name] = value(columns[i].get(r), f.type); });
  out.add(row);
}
out.flush();
