# shellcheck shell=bash
# Sourced by fresh_machine_check.sh and cross_build_check.sh: what mmdebstrap takes from the host
# to build a Debian 12 root from the same mirrors the host uses.
#
# debian_root_apt_settings OVERRIDE PROXY_FILE
#   Sets `sources` to OVERRIDE (a .sources / .list file) if it is not empty, else to the host's
#   non-empty apt source files; writes the host's apt proxy settings (Acquire::*::Proxy) to
#   PROXY_FILE and sets `apt_options` to mmdebstrap's --aptopt for it where there are any (none:
#   empty). Returns 1, with the arrays set, where there are no sources.
# shellcheck disable=SC2034  # sources and apt_options are the caller's
debian_root_apt_settings() {
  local override="$1" proxy_file="$2" file
  sources=()
  if [ -n "$override" ]; then
    sources=("$override")
  else
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
      [ -s "$file" ] && sources+=("$file")
    done
  fi
  apt_options=()
  apt-config dump | grep -E '^Acquire::[a-z]+::Proxy ' > "$proxy_file" || true
  [ -s "$proxy_file" ] && apt_options=(--aptopt="$proxy_file")
  [ ${#sources[@]} -gt 0 ]
}
