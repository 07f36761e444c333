#!/usr/bin/env bash
# Does the all-reduce projection recover a link of known figures? Shapes the link of each of 2
# hosts (scripts/netns_cluster.sh) to RATE and DELAY, runs an all-reduce sweep across them, and
# sets `trainbench summary`'s alpha-beta fit against the shaped figures. A benchmark run, not a
# test: it times a shared machine.
#
#   bash scripts/link_fit_check.sh [RATE[/DELAY] ...]    (default: 1gbit/200us 10gbit/20us)
#
# The fitted beta is the bus bandwidth, which at 2 ranks is each rank's rate on its link: it is
# set against the shaped rate (the wire's: TCP/IP headers take about 4.5% of it). Where the kernel
# has no netem, DELAY cannot be made: give rates alone (1gbit 4gbit). Exits 1 where a fitted beta
# is more than 15% off, 77 where no hosts can be made.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
binary="${TRAINBENCH_BINARY:-$root/build/release/bench/trainbench}"
links=("$@")
[ ${#links[@]} -gt 0 ] || links=(1gbit/200us 10gbit/20us)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# One line of the table from summary's answers on stdin; exit 1 where beta is 15% off or more.
cat >"$work/fit.py" <<'EOF'
import json, re, sys
rate, delay = sys.argv[1], sys.argv[2]
scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
m = re.fullmatch(r"([0-9.]+)([kmgt]?)bit", rate.lower())
rate_gbps = float(m[1]) * scale[m[2]] / 8 / 1e9
answer = json.load(sys.stdin)[6]
link = next(l for l in answer["projection"]["links"] if l["name"].startswith("measured"))
fit = re.search(r"rms residual ([0-9.]+%)", answer["answer"])
error = link["gbps"] / rate_gbps - 1
name = rate + ("/" + delay if delay else "")
alpha = "%.1f us" % (1e6 * link["alpha_s"])
print("%-14s %12.4f %12.4f %+7.1f%% %10s %12s %14s" % (name, rate_gbps, link["gbps"], 100 * error,
      delay or "-", alpha, fit[1] if fit else "-"))
sys.exit(abs(error) > 0.15)
EOF
worst=0
printf '%-14s %12s %12s %8s %10s %12s %14s\n' link "rate GB/s" "beta GB/s" error delay "alpha" \
  "rms residual"
for link in "${links[@]}"; do
  rate="${link%%/*}" delay=""
  [[ "$link" == */* ]] && delay="${link#*/}"
  report="$work/$rate.json"
  bash "$root/scripts/netns_cluster.sh" 2 --rate "$rate" ${delay:+--delay "$delay"} -- \
    run -b cpu-onednn -w 'allreduce sizes=4K:256M:x4 dtype=f32' -o "$report" >"$work/log" 2>&1
  status=$?
  [ "$status" = 77 ] && { tail -1 "$work/log" >&2; exit 77; }
  [ "$status" = 0 ] || { cat "$work/log" >&2; exit "$status"; }
  "$binary" summary "$report" --format json | python3 "$work/fit.py" "$rate" "$delay" || worst=1
done
exit "$worst"
