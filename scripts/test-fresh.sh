#!/usr/bin/env bash
# Proves the README's two commands on a fresh Debian 12: builds a minimal bookworm
# root with mmdebstrap (nothing in it but apt, ca-certificates and git), clones the
# commit under test (HEAD; uncommitted changes are not seen) into it, and runs inside
# it, with chroot,
#   1. bash scripts/run.sh ARGS   (set-up, build of folio, a short training run, a sample)
#   2. bash scripts/test.sh       (the whole suite, with what its checks against other
#                                  implementations need: chromium, Node 20, npm packages)
# ARGS default to a short run; `bash scripts/test-fresh.sh --max-iters 2000` times the
# default recipe. Prints each step's wall time; when a step fails, its first error line
# and the end of its log (build-fresh/logs/), and exits non-zero. A test that skips
# fails the run too (a missing install step), unless it skips for this machine's CPU.
#
# The root is a mount point (bound onto itself), so that ip netns works in it and
# MPI.TwoNamespacesOverTcp runs: in a chroot whose / is not one, ip netns exec cannot
# make / a slave mount. The host's own CAs (/usr/local/share/ca-certificates: a proxy
# that inspects TLS, say) go into the root as its resolv.conf does, for curl, git and
# npm (NODE_EXTRA_CA_CERTS: node reads no system store).
#
# Root only (CI runs as root). The root tarball is cached in build-fresh/ (ignored by
# git), so a second run skips mmdebstrap; packages are downloaded afresh each run, as a
# newcomer's would be.
#
# No mounts or processes are left behind, even if this script is killed (SIGKILL
# included): mmdebstrap and each chroot step run in their own mount and PID namespaces
# (unshare), so /proc and /dev are mounted only inside them and go away with their last
# process; unshare dies with this script (parent-death signal) and takes everything
# inside with it (--kill-child). The unpacked root is removed on exit, and one left by
# a SIGKILLed run is removed at the next start.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ "$(id -u)" -eq 0 ] || { echo "test-fresh: needs root (mmdebstrap, chroot, unshare)" >&2; exit 2; }
if (($#)); then run_args=("$@"); else
  run_args=(--max-iters 40 --eval-interval 20 --eval-iters 5)
fi
mirror=${FOLIO_FRESH_MIRROR:-http://deb.debian.org/debian}

bash scripts/setup.sh --only mmdebstrap zstd
# Runs a command in its own mount and PID namespaces: whatever it mounts (mmdebstrap
# mounts /proc and /dev in its work root, the steps below in theirs) is gone when its
# last process ends, however it ends.
# setpriv --pdeathsig: even if only this script is SIGKILLed, unshare gets SIGKILL too.
isolated=(setpriv --pdeathsig KILL unshare --mount --pid --kill-child --propagation private)
cache=$repo/build-fresh
mkdir -p "$cache/logs"
tarball=$cache/bookworm-minbase.tar.zst
if [ ! -s "$tarball" ]; then
  echo "[fresh] mmdebstrap: minimal bookworm root -> $tarball"
  "${isolated[@]}" mmdebstrap --quiet --variant=minbase --include=ca-certificates,git bookworm \
    "$cache/partial.tar.zst" "$mirror" >"$cache/logs/mmdebstrap.log" 2>&1 \
    || { tail -n 20 "$cache/logs/mmdebstrap.log" >&2; exit 1; }
  mv "$cache/partial.tar.zst" "$tarball"   # mmdebstrap picks tar + zstd from the name
fi

# Refuses to delete a tree that still has anything mounted below it (it never should:
# the mounts live in the namespace), so a bind of /dev can never be deleted through.
remove_root() {
  local dir=$1
  [ -d "$dir" ] || return 0
  if findmnt -rn -o TARGET | grep -q "^$dir/"; then
    echo "test-fresh: $dir still has mounts; not removing it" >&2
    return 1
  fi
  rm -rf "$dir"
}
for stale in "$cache"/root.*; do [ -e "$stale" ] && remove_root "$stale"; done

root=$(mktemp -d "$cache/root.XXXXXX")
child=""
cleanup() {
  local status=$?
  set +e
  trap - EXIT INT TERM HUP
  # SIGKILL: unshare blocks SIGTERM and SIGINT while it waits; killed, it takes the
  # namespace with it (--kill-child), mounts and all.
  if [ -n "$child" ]; then kill -KILL "$child" 2>/dev/null; wait "$child" 2>/dev/null; fi
  remove_root "$root" || status=1
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

tar -xf "$tarball" -C "$root"
cp /etc/resolv.conf "$root/etc/resolv.conf"
local_cas=(/usr/local/share/ca-certificates/*.crt)
node_cas=""
if [ -e "${local_cas[0]}" ]; then
  cp "${local_cas[@]}" "$root/usr/local/share/ca-certificates/"
  node_cas=NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
fi
git clone --quiet --no-local "$repo" "$root/folio"
git -C "$root/folio" checkout --quiet --detach "$(git rev-parse HEAD)"
echo "[fresh] testing $(git rev-parse --short HEAD) in $root"

# step NAME COMMAND: runs COMMAND in /folio inside the root, its output to logs/NAME.log.
step() {
  local name=$1 command=$2 log=$cache/logs/$1.log start=$SECONDS
  echo "[fresh] $name: $command"
  "${isolated[@]}" /bin/sh -c '
      mount --rbind "$1" "$1" && mount -t proc proc "$1/proc" && mount --rbind /dev "$1/dev" &&
      exec env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin $3 \
        chroot "$1" /bin/bash -c "cd /folio && $2"' sh "$root" "$command" "$node_cas" >"$log" 2>&1 &
  child=$!
  local status=0
  wait "$child" || status=$?
  child=""
  if ((status != 0)); then
    echo "[fresh] $name FAILED (exit $status) after $((SECONDS - start)) s" >&2
    echo "[fresh] first error: $(grep -m1 -E 'rror|FAILED|Failed|E: |fatal' "$log" || echo '(none matched)')" >&2
    echo "[fresh] end of $log:" >&2
    tail -n 25 "$log" >&2
    exit 1
  fi
  echo "[fresh] $name passed in $((SECONDS - start)) s"
}

[ -z "$node_cas" ] || step trust update-ca-certificates
step run "bash scripts/run.sh ${run_args[*]}"
tail -n 12 "$cache/logs/run.log"
step test "bash scripts/test.sh"
grep -E "tests passed|tests failed" "$cache/logs/test.log"
# Every test ran, but those a CPU without AVX-512 or F16C (or with one core) must skip.
list=$root/folio/build/skipped-tests.txt
[ -f "$list" ] || { echo "[fresh] test: scripts/test.sh wrote no $list" >&2; exit 1; }
if grep -v -E $'\t.*(this CPU|one core)' "$list" >"$cache/logs/skipped.txt"; then
  echo "[fresh] test: these tests skipped in the fresh root (an install step is missing?):" >&2
  sed 's/^/  /' "$cache/logs/skipped.txt" >&2
  exit 1
fi
echo "[fresh] test: no test skipped$([ -s "$list" ] && echo ", but for this CPU: $(cut -f1 "$list" | tr '\n' ' ')")"
