#!/usr/bin/env bash
# Runs a README command on a fresh Debian machine: builds a minimal root of the release
# (bookworm: Debian 12, the default; trixie: Debian 13) with mmdebstrap from the host's own apt
# sources (their suites renamed for another release), clones this checkout into it and runs the
# command there as root, so a package that setup.sh forgets shows up as a failure here.
# Usage: scripts/fresh_machine_check.sh [--release bookworm|trixie] [COMMAND]
#   (default COMMAND: bash scripts/bench.sh)
# COMMAND is any shell string, run with bash in the clone (e.g. 'bash scripts/test.sh').
# Exit: 0 the command passed; 77 skipped, the root could not be built (no network, no
# mirror, no mmdebstrap); otherwise the command's status (77 from the command becomes 1).
# Environment: KEEP_ROOT=1 keeps the root (its path is printed); TMPDIR (default /var/tmp)
# holds it; FRESH_CHECK_SOURCES=FILE uses that .sources/.list file instead of the host's
# (for testing, e.g. one naming an unreachable mirror to check the skip path).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
release=bookworm
if [ "${1:-}" = --release ]; then
  release="${2:?--release takes bookworm or trixie}"
  shift 2
fi
case "$release" in
  bookworm) debian="Debian 12" ;;
  trixie) debian="Debian 13" ;;
  *)
    echo "fresh_machine_check: unknown release '$release' (bookworm or trixie)" >&2
    exit 2
    ;;
esac
command="${1:-bash scripts/bench.sh}"
# shellcheck source=scripts/lib/debian_root.sh
source "$root/scripts/lib/debian_root.sh"
say() { echo "fresh_machine_check: $*" >&2; }
skip() {
  say "skipped: could not build a $debian root ($*)"
  exit 77
}
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || skip "not root and no sudo"
  sudo="sudo"
fi

# The root is several hundred MiB and the build inside it a few GiB: /var/tmp, not a tmpfs /tmp.
tmp="$(mktemp -d "${TMPDIR:-/var/tmp}/fresh_machine_check.XXXXXX")"
chmod 755 "$tmp"  # apt downloads as its _apt user, which must reach the root inside
target="$tmp/root"
cleanup() {
  if [ "${KEEP_ROOT:-0}" = 1 ]; then
    say "kept the root at $target"
    return
  fi
  # The command's mounts live in its own mount namespace and vanish with it; this catches
  # any an interrupted mmdebstrap left, so that rm can never reach the host's /dev or /sys.
  findmnt -rn -o TARGET | awk -v p="$target/" 'index($0, p) == 1' | sort -r |
    while read -r mount; do $sudo umount -l "$mount" || true; done
  $sudo rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT

start=$SECONDS
# The host's apt sources, read now, so that the root uses the same mirrors the host does, and
# its apt proxy, if it has one (kept in the root, where setup.sh runs apt-get again).
debian_root_apt_settings "${FRESH_CHECK_SOURCES:-}" "$tmp/proxy.conf" ||
  skip "no apt sources on the host"
# Another release from the same mirrors: the host's suites (bookworm, bookworm-updates,
# bookworm-security) renamed (trixie, ...).
host_release="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
if [ -n "$host_release" ] && [ "$host_release" != "$release" ]; then
  renamed=()
  for file in "${sources[@]}"; do
    copy="$tmp/$(basename "$file")"
    sed -E "s/\b$host_release(-[a-z]+)?\b/$release\1/g" "$file" > "$copy"
    renamed+=("$copy")
  done
  sources=("${renamed[@]}")
fi

$sudo unshare --mount true 2>/dev/null || skip "cannot create a mount namespace to run the command in"
if ! command -v mmdebstrap >/dev/null; then
  { $sudo apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends mmdebstrap; } ||
    skip "mmdebstrap could not be installed"
fi
# Nothing of the project's dependencies: the essential packages, apt, and what cloning and
# an https mirror need.
$sudo mmdebstrap --mode=root --variant=minbase --include=git,ca-certificates "${apt_options[@]}" \
  "$release" "$target" "${sources[@]}" || skip "mmdebstrap failed, see above"
# Keyrings that the sources name by Signed-By and the root lacks (a third-party repository's).
sed -n -E 's/^Signed-By: *(\/[^ ]+) *$/\1/p; s/.*signed-by=(\/[^] ]+).*/\1/p' "${sources[@]}" | sort -u |
  while read -r keyring; do
    if [ -f "$keyring" ] && [ ! -e "$target$keyring" ]; then
      $sudo mkdir -p "$target$(dirname "$keyring")"
      $sudo cp "$keyring" "$target$keyring"
    fi
  done
say "root built in $((SECONDS - start)) s ($($sudo du -sh "$target" | cut -f1))"

# git clone takes HEAD's committed state: uncommitted changes are not in the root.
[ -z "$(git -C "$root" status --porcelain)" ] ||
  say "note: the checkout has uncommitted changes; the root gets HEAD $(git -C "$root" rev-parse --short HEAD) without them"
$sudo git -c safe.directory='*' clone -q --no-hardlinks "$root" "$target/trainbench"

# The host's compiler cache, shared with the root's builds (setup.sh installs ccache there too):
# the root's compiler is the same package from the same mirror, so what the host compiled hits.
# A cache cannot hide a missing package: configure, the headers ccache checks, and linking run
# for real. FRESH_CHECK_CCACHE=0 builds the root cold.
cache=""
if [ "${FRESH_CHECK_CCACHE:-1}" = 1 ] && command -v ccache >/dev/null; then
  cache="$(ccache -k cache_dir 2>/dev/null || true)"
  [ -d "$cache" ] || cache=""
fi
$sudo mkdir -p "$target/root/.cache/ccache"
[ -z "$cache" ] || say "sharing the host's compiler cache ($cache) with the root"

start=$SECONDS
say "running in the root: $command"
status=0
# A mount and PID namespace of its own: /proc, /sys and /dev are mounted there only, and go
# away with the command however it ends. A clean environment, as a fresh login has.
# shellcheck disable=SC2016  # $1 and $2 are the inner shell's arguments
$sudo unshare --mount --pid --fork --kill-child -- sh -c '
  mount -t proc proc "$1/proc" && mount --rbind /sys "$1/sys" && mount --rbind /dev "$1/dev" &&
  { [ -z "$3" ] || mount --bind "$3" "$1/root/.cache/ccache"; } &&
  exec chroot "$1" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    ${http_proxy:+http_proxy="$http_proxy"} ${https_proxy:+https_proxy="$https_proxy"} \
    ${no_proxy:+no_proxy="$no_proxy"} bash -c "cd /trainbench && $2"
' sh "$target" "$command" "$cache" || status=$?
if [ "$status" -ne 0 ]; then
  say "FAILED: '$command' exited with status $status in the $debian root after $((SECONDS - start)) s"
  [ "$status" -ne 77 ] || status=1  # 77 means skipped
  exit "$status"
fi
say "passed: '$command' in the $debian root in $((SECONDS - start)) s"
