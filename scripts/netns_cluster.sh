#!/usr/bin/env bash
# Runs trainbench (or another MPI program) on several hosts made on this machine: each host a
# network namespace with its own host name (a UTS namespace), address and share of the CPUs,
# joined through a bridge, launched by Open MPI's rsh launcher through an agent that enters the
# host's namespaces. Traffic between hosts goes through Open MPI's TCP transport.
#
#   bash scripts/netns_cluster.sh HOSTS [--ranks-per-host N] [--rate RATE] [--delay DELAY]
#        [--loss PCT] [--fault KIND@WHEN] [--program PATH] -- ARGS...
#
# --rate and --delay shape each host's outgoing traffic, so that a message from one host to
# another meets them once (--rate 1gbit --delay 200us), with netem, or where the kernel lacks it
# with tbf (then no --delay); --loss PCT drops that share of the packets each host receives. --fault acts on the
# last host: KIND is link-down (its link cut), loss=PCT (its incoming packets lost from then on)
# or kill (its ranks killed); WHEN is SECONDS after the launch, or REPORT=N[+SECONDS]:
# once the report REPORT holds N results (and SECONDS more). --program runs PATH instead of
# trainbench. Everything made is taken down on exit, after a failure too. Needs root, iproute2
# and Open MPI; where namespaces cannot be made it exits 77 (a skip for ctest). The exit code is
# mpirun's.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  echo "usage: scripts/netns_cluster.sh HOSTS [--ranks-per-host N] [--rate RATE] [--delay DELAY]" \
    "[--loss PCT] [--fault link-down|loss=PCT|kill@SECONDS|REPORT=N[+SECONDS]]" \
    "[--program PATH] -- ARGS..." >&2
  exit 2
}

[ $# -ge 1 ] || usage
hosts="$1"
shift
if ! [[ "$hosts" =~ ^[0-9]+$ ]] || [ "$hosts" -lt 1 ] || [ "$hosts" -gt 16 ]; then
  echo "netns_cluster: HOSTS must be 1 to 16, not '$hosts'" >&2
  exit 2
fi
ranks_per_host=1 rate="" delay="" loss="" fault=""
program="${TRAINBENCH_BINARY:-$root/build/release/bench/trainbench}"
while [ $# -gt 0 ]; do
  [ "$1" = -- ] || [ $# -ge 2 ] || usage
  case "$1" in
    --ranks-per-host) ranks_per_host="$2" ;;
    --rate) rate="$2" ;;
    --delay) delay="$2" ;;
    --loss) loss="$2" ;;
    --fault) fault="$2" ;;
    --program) program="$2" ;;
    --) shift; break ;;
    *) usage ;;
  esac
  shift 2
done
if ! [[ "$ranks_per_host" =~ ^[1-9][0-9]*$ ]]; then
  echo "netns_cluster: --ranks-per-host must be a positive integer, not '$ranks_per_host'" >&2
  exit 2
fi
fault_kind="${fault%%@*}" fault_when="${fault#*@}"
if [ -n "$fault" ] && ! { [[ "$fault_kind" =~ ^(link-down|kill|loss=[0-9.]+)$ ]] &&
  [[ "$fault_when" =~ ^([0-9.]+|.+=[0-9]+(\+[0-9.]+)?)$ ]]; }; then
  echo "netns_cluster: --fault is KIND@WHEN (KIND link-down, loss=PCT or kill; WHEN SECONDS or" \
    "REPORT=N[+SECONDS]), not '$fault'" >&2
  exit 2
fi
[ -x "$program" ] || { echo "netns_cluster: no program at $program (build first)" >&2; exit 2; }

skip() {
  echo "netns_cluster: skipped: $*" >&2
  exit 77
}
[ "$(id -u)" = 0 ] || skip "making network namespaces needs root"
for tool in ip tc nsenter unshare taskset sysctl mpirun python3; do
  command -v "$tool" >/dev/null || skip "no $tool (scripts/setup.sh --test installs it)"
done

# Names unique to this run: two clusters can stand side by side.
tag="tb$$"
subnet="10.$((200 + $$ % 50)).$(($$ / 50 % 250))"
bridge="${tag}br"
state="$(mktemp -d /run/tb-cluster.XXXXXX)" || skip "cannot write under /run"

teardown() {
  [ -n "${fault_pid:-}" ] && kill "$fault_pid" 2>/dev/null
  for ((h = 0; h <= hosts; ++h)); do
    ip netns pids "${tag}h$h" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "${tag}h$h" 2>/dev/null
    umount "$state/uts.${tag}h$h" 2>/dev/null
  done
  ip link del "$bridge" 2>/dev/null
  rm -rf "$state" "/etc/netns/${tag}h0"
  rmdir /etc/netns 2>/dev/null
}
trap teardown EXIT
trap 'exit 130' INT TERM

ip link add "$bridge" type bridge 2>/dev/null || skip "cannot make a bridge (no CAP_NET_ADMIN?)"
ip link set "$bridge" up || skip "cannot bring up a bridge"
# Host H: a network namespace with address .H+1 on the bridge; host 0 is the launcher's.
join() {
  local ns="${tag}h$1"
  ip netns add "$ns" 2>/dev/null || skip "cannot make a network namespace"
  ip link add "${tag}v$1" type veth peer name eth0 netns "$ns" || skip "cannot make a veth pair"
  ip link set "${tag}v$1" master "$bridge" up
  ip -n "$ns" addr add "$subnet.$(($1 + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
}
# A host's link shaped. Its outgoing traffic by netem where the kernel has it (rate and delay),
# else by tbf (rate only: a kernel without netem cannot add a delay, and the run is skipped,
# saying so). Its loss by an nftables rule on the packets it receives, so that their senders
# see a loss on the wire, not a local drop that TCP would handle apart.
shape() {
  local ns="$1" packet_loss="$2"
  if [ -n "$delay" ]; then
    ip netns exec "$ns" tc qdisc replace dev eth0 root netem limit 100000 delay "$delay" \
      ${rate:+rate "$rate"} 2>/dev/null ||
      skip "this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): no --delay"
  elif [ -n "$rate" ]; then
    # A bucket of 1 ms at the rate (64 KiB at least): a smaller one holds bulk TCP under the rate
    # (a 16 KiB bucket: 100 MB/s at 1 Gbit/s, against 118 with this one).
    local burst
    burst=$(python3 -c 'import re, sys
m = re.fullmatch(r"([0-9.]+)([kmgt]?)bit", sys.argv[1].lower())
scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
print(max(65536, int(float(m[1]) * scale[m[2]] / 8 / 1000)) if m else "")' "$rate")
    [ -n "$burst" ] || { echo "netns_cluster: --rate is N[kmgt]bit, not '$rate'" >&2; return 1; }
    ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" \
      latency 100ms || return 1
  fi
  if [ -n "$packet_loss" ]; then
    command -v nft >/dev/null || skip "no nft for --loss (scripts/setup.sh --test installs it)"
    [[ "$packet_loss" =~ ^[0-9]+$ ]] && [ "$packet_loss" -le 100 ] ||
      { echo "netns_cluster: a loss is a whole percent, not '$packet_loss'" >&2; return 1; }
    ip netns exec "$ns" nft delete table inet trainbench_loss 2>/dev/null
    echo "table inet trainbench_loss { chain in { type filter hook input priority 0;
      numgen random mod 100 < $packet_loss drop; }; }" | ip netns exec "$ns" nft -f - || return 1
  fi
}

join 0
# The launcher gives up on a host it cannot reach after about 13 s of retransmissions (15
# retries, the default, take about 15 minutes), as a cluster's resource manager would end the
# job; the hosts keep the default.
ip netns exec "${tag}h0" sysctl -qw net.ipv4.tcp_retries2=5
cpus=$(nproc)
host_list=()
for ((h = 1; h <= hosts; ++h)); do
  ns="${tag}h$h"
  join "$h"
  touch "$state/uts.$ns"
  unshare --uts="$state/uts.$ns" hostname "trainbench-host$h" || skip "cannot make a UTS namespace"
  shape "$ns" "$loss" || {
    echo "netns_cluster: tc cannot shape a link with rate '$rate', delay '$delay', loss '$loss'" >&2
    exit 2
  }
  # Each host its own share of the CPUs: every host's first local rank would otherwise bind to
  # the same first CPU.
  first=$(((h - 1) * cpus / hosts)) end=$((h * cpus / hosts))
  [ "$end" -gt "$first" ] || end=$((first + 1))
  echo "trainbench-host$h $ns $((first % cpus))-$(((end - 1) % cpus))" >>"$state/hosts"
  echo "$subnet.$((h + 1)) trainbench-host$h" >>"$state/etc_hosts"
  host_list+=("trainbench-host$h:$ranks_per_host")
done
# The launcher knows the hosts by name (ip netns exec puts /etc/netns/NS/hosts over /etc/hosts),
# so that Open MPI's messages name them as the reports do.
mkdir -p "/etc/netns/${tag}h0" && { echo "127.0.0.1 localhost"; cat "$state/etc_hosts"; } \
  >"/etc/netns/${tag}h0/hosts" || skip "cannot write /etc/netns"

# The launcher's agent: `AGENT [options] HOST COMMAND...` runs COMMAND in HOST's namespaces.
cat >"$state/agent" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
ns=\$(awk -v a="\$1" '\$1 == a { print \$2 }' "$state/hosts")
cpus=\$(awk -v a="\$1" '\$1 == a { print \$3 }' "$state/hosts")
[ -n "\$ns" ] || { echo "netns_cluster agent: unknown host \$1" >&2; exit 1; }
shift
exec nsenter --net=/run/netns/\$ns --uts="$state/uts.\$ns" -- taskset -c \$cpus /bin/sh -c "\$*"
EOF
chmod +x "$state/agent"

# Waits for WHEN: SECONDS, or REPORT=N[+SECONDS].
wait_for_fault_time() {
  if [[ "$fault_when" =~ ^[0-9.]+$ ]]; then
    sleep "$fault_when"
    return
  fi
  local report="${fault_when%=*}" spec="${fault_when##*=}"
  local results="${spec%%+*}" extra=0
  [[ "$spec" == *+* ]] && extra="${spec#*+}"
  # A report left from an earlier run does not count: only one written since the launch.
  until python3 -c 'import json, os, sys
try:
    fresh = os.path.getmtime(sys.argv[1]) >= float(sys.argv[3])
    sys.exit(not fresh or len(json.load(open(sys.argv[1]))["results"]) < int(sys.argv[2]))
except Exception:
    sys.exit(1)' "$report" "$results" "$launched" 2>/dev/null; do
    sleep 0.2
  done
  sleep "$extra"
}

last="${tag}h$hosts"
launched=$(date +%s.%N)
if [ -n "$fault" ]; then
  (
    wait_for_fault_time
    date +%s.%N >"$state/fault_at"
    echo "netns_cluster: fault on trainbench-host$hosts: $fault_kind" >&2
    case "$fault_kind" in
      link-down) ip -n "$last" link set eth0 down ;;
      kill)  # its ranks, not the launcher's daemon that reports their end
        for pid in $(ip netns pids "$last"); do
          [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$program")" ] && kill -9 "$pid"
        done ;;
      loss=*) shape "$last" "${fault_kind#loss=}" ;;
    esac
  ) &
  fault_pid=$!
fi

IFS=,
hostarg="${host_list[*]}"
unset IFS
# The variables that steer trainbench go to every host, as they must on real ones.
exports=()
for name in $(compgen -e | grep '^TRAINBENCH_'); do exports+=(-x "$name"); done
# The launcher's settings by name for Open MPI 4 (ORTE) and 5 (PRRTE; its shared-memory transport
# is "sm"): the agent, and TCP on the bridge alone for the launcher and between hosts.
shared_memory=vader
[[ "$(mpirun --version 2>/dev/null | head -1)" =~ \ ([0-9]+)\. ]] && [ "${BASH_REMATCH[1]}" -ge 5 ] &&
  shared_memory=sm
export OMPI_MCA_plm_rsh_agent="$state/agent" PRTE_MCA_plm_ssh_agent="$state/agent" \
  OMPI_MCA_oob_tcp_if_include="$subnet.0/24" PRTE_MCA_oob_tcp_if_include="$subnet.0/24" \
  OMPI_MCA_pml=ob1 OMPI_MCA_btl="self,$shared_memory,tcp" OMPI_MCA_btl_tcp_if_include="$subnet.0/24"
ip netns exec "${tag}h0" mpirun --allow-run-as-root --oversubscribe --bind-to none \
  -np $((hosts * ranks_per_host)) --host "$hostarg" "${exports[@]}" "$program" "$@"
status=$?
if [ -f "$state/fault_at" ]; then
  echo "netns_cluster: the job ended $(awk -v a="$(cat "$state/fault_at")" -v b="$(date +%s.%N)" \
    'BEGIN { printf "%.1f", b - a }') s after the fault, exit $status" >&2
elif [ -n "$fault" ]; then
  echo "netns_cluster: the job ended before the fault, exit $status" >&2
fi
exit "$status"
