#!/usr/bin/env bash
# Runs every Google Benchmark binary in BUILD_DIR/bench and prints one table:
# benchmark, wall time per iteration, and the counters each benchmark reports
# (epsilon, throughput, ...). Extra arguments go to every benchmark binary,
# e.g. --benchmark_filter=Pld.
set -euo pipefail
BUILD_DIR=${1:-build}
shift || true
out=$(mktemp -d)
for b in "$BUILD_DIR"/bench/*_bench; do
  [ -x "$b" ] || continue
  name=$(basename "$b")
  echo "running $name ..." >&2
  "$b" --benchmark_out="$out/$name.json" --benchmark_out_format=json "$@" >/dev/null
done
python3 - "$out" <<'PY'
import json, pathlib, sys
rows = []
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    data = json.loads(f.read_text())
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate":
            continue
        skip = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
                "iterations", "real_time", "cpu_time", "time_unit", "family_index",
                "per_family_instance_index", "aggregate_name", "aggregate_unit", "label",
                "error_occurred", "error_message"}
        counters = ", ".join(f"{k}={v:.6g}" for k, v in b.items()
                             if k not in skip and isinstance(v, (int, float)))
        rows.append((f.stem, b["name"], f'{b["real_time"]:.4g} {b["time_unit"]}', counters))
w = [max(len(r[i]) for r in rows) if rows else 10 for i in range(3)]
print(f'{"binary":<{w[0]}}  {"benchmark":<{w[1]}}  {"time":>{w[2]}}  counters')
for r in rows:
    print(f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:>{w[2]}}  {r[3]}")
PY
rm -rf "$out"
