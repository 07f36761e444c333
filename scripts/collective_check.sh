#!/usr/bin/env bash
# Side by side, alternated: the 2-rank f32 all-reduce sweep through trainbench (MPI on host
# memory, the CPU backend) and through a plain MPI_Allreduce loop (trainbench-baseline-mpi-allreduce),
# each round one baseline sweep then one trainbench sweep. Prints busbw per size (the median over
# rounds of each side's median) and their ratio, trainbench / baseline.
# Usage: scripts/collective_check.sh [BUILD_DIR] [ROUNDS] [MIN] [MAX]   (sizes in bytes)
set -euo pipefail
build="${1:-build/release}"
rounds="${2:-2}"
min="${3:-8}"
max="${4:-1073741824}"
ranks="${RANKS:-2}"
backend="${BACKEND:-cpu-onednn}"
out="$(mktemp -d /tmp/trainbench-collective-check.XXXXXX)"
mpi=(mpirun --oversubscribe --allow-run-as-root -np "$ranks")
for round in $(seq "$rounds"); do
  echo "--- round $round" >&2
  "${mpi[@]}" "$build/bench/baselines/trainbench-baseline-mpi-allreduce" "$min" "$max" 2 \
    > "$out/baseline-$round.jsonl"
  "${mpi[@]}" "$build/bench/trainbench" run -b "$backend" --threads 1 \
    -w "allreduce sizes=$min:$max:x2 dtype=f32" -o "$out/trainbench-$round.json" > /dev/null
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
base, tb = {}, {}
for r in range(1, rounds + 1):
    for line in open(f"{out}/baseline-{r}.jsonl"):
        row = json.loads(line)
        if not row["check"]:
            sys.exit(f"baseline result wrong at {row['bytes']} bytes")
        base.setdefault(row["bytes"], []).append(row["busbw_gbps"])
    for result in json.load(open(f"{out}/trainbench-{r}.json"))["results"]:
        if result["status"] != "passed":
            sys.exit(f"{result['workload']}: {result['status']}: {result.get('reason', '')}")
        size = int(dict(kv.split("=") for kv in result["workload"].split()[1:])["bytes"])
        tb.setdefault(size, []).append(result["metrics"]["busbw_gbps"])
print(f"{'bytes':>12} {'baseline GB/s':>14} {'trainbench GB/s':>16} {'ratio':>7}")
for size in sorted(base):
    b, t = statistics.median(base[size]), statistics.median(tb[size])
    print(f"{size:>12} {b:>14.4f} {t:>16.4f} {t / b:>7.3f}")
PY
echo "reports and baseline lines: $out" >&2
