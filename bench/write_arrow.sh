#!/usr/bin/env bash
# Write throughput, bytes on disk per row and peak memory of write-arrow
# (Parquet with zstd, Arrow IPC uncompressed) next to write-jsonl, in the same
# run, over the same rows:
#
#   bench/write_arrow.sh [ROWS] [COUNT]     # default 10000 rows, 3 rounds
#
# Rows have ~3,000 tokens (2,700-3,300: a 150-450 token prompt, the rest
# generated): input_ids of plausible Qwen ids (Zipf-distributed over the
# vocabulary, with repeated spans), a loss mask of 0s then 1s, the
# completion's own prompt_ids/output_ids, reasoning and answer text of ~3.5
# characters a token cut from the Go sources, and the request settings. 1024
# distinct rows (one row group's worth, so that no row group compresses a
# repeat) are reused under new ids. Each writer writes ROWS rows into a
# fresh directory and commits once at the end (fsync included).
#
# MB/s counts the input as the rows' JSON size (what write-jsonl writes), so
# it is the same bytes for every writer. peak-heap is the highest Go heap
# (objects, live or not yet swept, sampled every 2 ms) above the heap before
# the writer opened; arrow-peak is the most Arrow buffers write-arrow had
# allocated at once (for Parquet, about a MiB of rows and the open row
# group's compressed pages; for Arrow IPC one batch of row_group_rows =
# 1024). Results go to
# bench/out/write_arrow.txt; the table shows the median of each figure over
# the rounds and ratios against write-jsonl.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rows=${1:-10000}
count=${2:-3}
mkdir -p "$root/bench/out"
out="$root/bench/out/write_arrow.txt"
cd "$root"
go test ./stages -run '^$' -bench '^BenchmarkWriteArrow$' -benchtime "${rows}x" -count "$count" -timeout 60m | tee "$out"
echo
echo "median of $count rounds, $rows rows of ~3,000 tokens each:"
awk '/^BenchmarkWriteArrow\// {
  name=$1; sub(/^BenchmarkWriteArrow\//, "", name); sub(/-[0-9]+$/, "", name)
  if (!(name in seen)) { seen[name] = 1; order[++n] = name }
  for (i = 3; i < NF; i += 2) v[name, $(i+1)] = v[name, $(i+1)] " " $i
}
function median(s,   a, k, i, j, t) {
  k = split(s, a, " ")
  if (k == 0) return -1
  for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
END {
  split("rows/s MB/s disk-B/row json-B/row peak-heap-MB arrow-peak-MB B/op", units, " ")
  for (i = 1; i <= n; i++) for (u in units) m[order[i], units[u]] = median(v[order[i], units[u]])
  printf "  %-8s %8s %8s %11s %11s %10s %11s %9s %11s %11s\n", "", "rows/s", "MB/s", "disk-B/row", "peak-heap", "arrow-peak", "alloc-B/row", "speed", "size", "peak-heap"
  printf "  %-8s %8s %8s %11s %11s %10s %11s %9s %11s %11s\n", "", "", "", "", "MB", "MB", "", "vs jsonl", "vs jsonl", "vs jsonl"
  for (i = 1; i <= n; i++) {
    o = order[i]
    ap = m[o, "arrow-peak-MB"] < 0 ? "-" : sprintf("%.1f", m[o, "arrow-peak-MB"])
    printf "  %-8s %8.0f %8.1f %11.0f %11.1f %10s %11.0f %8.2fx %10.3fx %10.2fx\n", o, m[o, "rows/s"], m[o, "MB/s"], m[o, "disk-B/row"], m[o, "peak-heap-MB"], ap, m[o, "B/op"],
      m[o, "rows/s"] / m["jsonl", "rows/s"], m[o, "disk-B/row"] / m["jsonl", "disk-B/row"], m[o, "peak-heap-MB"] / m["jsonl", "peak-heap-MB"]
  }
  printf "  input: %.0f bytes of JSON a row\n", m["jsonl", "json-B/row"]
}' "$out"
