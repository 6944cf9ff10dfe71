// Shared by duckdb_rows.mjs, arrow_rows.mjs and testdata/write_fixtures.mjs:
// loading the reader packages from .cache/readers (scripts/setup-readers.sh),
// turning their values into JSON, and writing JSON lines.
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// The directory scripts/setup-readers.sh installs into: $PIPE_READERS_DIR,
// else .cache/readers at the repository root (two levels above this file).
export const readersDir = process.env.PIPE_READERS_DIR
  || resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '.cache', 'readers');

// A bare `import` ignores NODE_PATH, so resolve from inside .cache/readers.
const requireFromReaders = createRequire(join(readersDir, 'package.json'));

// load requires a package installed in .cache/readers, or exits 3 with a hint.
export function load(name) {
  try {
    return requireFromReaders(name);
  } catch (err) {
    process.stderr.write(`readers: cannot load ${name} from ${readersDir} (run scripts/setup-readers.sh): ${err.message}\n`);
    process.exit(3);
  }
}

// int turns a bigint into a number when exact, else into its decimal string.
export function int(v) {
  return (v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)) ? Number(v) : v.toString();
}

// jsonValue turns a plain JS value from a reader into something
// JSON.stringify writes exactly: bigints as numbers (or decimal strings past
// 2^53), non-finite floats as strings, bytes (BLOB/Binary) as base64, dates as
// ISO strings, typed arrays and arrays as arrays, objects field by field.
export function jsonValue(v) {
  if (v === null || v === undefined) return null;
  switch (typeof v) {
    case 'bigint': return int(v);
    case 'number': return Number.isFinite(v) ? v : String(v);
    case 'string': case 'boolean': return v;
  }
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
  if (v instanceof Date) return v.toISOString();
  if (ArrayBuffer.isView(v) || Array.isArray(v)) return Array.from(v, jsonValue);
  if (typeof v === 'object') {
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = jsonValue(x);
    return out;
  }
  return String(v);
}

// Lines buffers JSON lines and writes them to stdout in large pieces.
export class Lines {
  constructor() { this.parts = []; this.size = 0; }
  add(obj) {
    const s = JSON.stringify(obj) + '\n';
    this.parts.push(s);
    this.size += s.length;
    if (this.size >= 1 << 20) this.flush();
  }
  flush() {
    if (this.parts.length) process.stdout.write(this.parts.join(''));
    this.parts = []; this.size = 0;
  }
}

// fail prints a one-line error and exits 1.
export function fail(msg) {
  process.stderr.write(`readers: ${msg}\n`);
  process.exit(1);
}
