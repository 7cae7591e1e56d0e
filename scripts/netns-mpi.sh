#!/usr/bin/env bash
# Two "hosts" on one machine: two Linux network namespaces joined by a veth pair, one
# MPI rank in each, Open MPI over TCP on that link only (no shared memory between the
# ranks: --mca btl tcp,self). mpirun runs in the first namespace and starts the second
# host's daemon (orted) in the second through a tiny rsh agent, as ssh would on a
# cluster, so the daemons' own traffic crosses the link too.
#
#   netns-mpi.sh test  FOLIO                    the checks below (ctest runs this)
#   netns-mpi.sh bench FOLIO [STEPS] [REPS]     config M, 1 rank against 2 ranks on a
#                                               1 Gbit/s link, overlap on and off
#   (time it under nice -n -19, not chrt -f: ranks polling MPI at real-time priority
#   starve the kernel's network processing on a small machine, and the run stalls)
#
# test:
#  1. 2 ranks across the namespaces end with the weights of one process (to float
#     rounding), with the all-reduce overlapped with backward and after it (bit for bit
#     the same), on a link shaped to 1 Gbit/s when tc is there;
#  2. the rank in the second namespace killed mid-run: the job ends within 30 s,
#     non-zero, and the checkpoint on disk loads;
#  3. the link cut mid-run (ip link set down): the job ends within 30 s, non-zero, with
#     folio's message ("no answer from the other ranks ... --comm-timeout"), and the
#     checkpoint loads. Two timeouts do it, because over TCP nothing else would: the
#     ranks' --comm-timeout (folio's watchdog, train/distributed.h) for a collective that
#     waits on the dead link, and Open MPI's keepalive on the daemons' connections
#     (oob_tcp_keepalive_*), which ends mpirun and the far daemon.
# Skipped (exit 77) unless root, ip netns works, and mpirun and numpy are there; the
# prerequisites are checked before anything is made. Everything it creates (namespaces,
# veth, the /run/netns mount, processes, files) goes on every exit path.
set -euo pipefail
mode=${1:?usage: netns-mpi.sh test|bench FOLIO [STEPS] [REPS]}
folio=$(realpath "${2:?usage: netns-mpi.sh test|bench FOLIO}")
here=$(cd "$(dirname "$0")/.." && pwd)
python=/usr/bin/python3
skip() { echo "skipped: $*"; exit 77; }
# CI runs the test in scripts/test-fresh.sh's root, as root.
[ "$(id -u)" -eq 0 ] || skip "needs root for ip netns (sudo ctest --test-dir build -R MPI.TwoNamespacesOverTcp runs it)"
command -v ip >/dev/null || skip "no ip (iproute2)"
command -v mpirun >/dev/null || skip "no mpirun"
"$python" -c "import numpy" 2>/dev/null || skip "$python has no numpy"
# What the namespaces need, tried first in throwaway namespaces that vanish with their
# process, so that a skip leaves nothing behind: the rights to make a network and a
# mount namespace (ip netns exec needs both) and veth links.
command -v unshare >/dev/null || skip "no unshare (util-linux)"
if ! unshare --net --mount true 2>/dev/null; then
  mountpoint -q / || skip "cannot make network and mount namespaces: / is not a mount point (a chroot?), and" \
    "ip netns exec needs it to be one (scripts/test-fresh.sh binds its root onto itself for this test)"
  skip "cannot make network and mount namespaces here (a container without CAP_SYS_ADMIN?)"
fi
unshare --net ip link add fprobe0 type veth peer name fprobe1 2>/dev/null || skip "cannot make a veth link here"
[ -d /run ] && [ -w /run ] || skip "/run is not writable (ip netns keeps its namespaces in /run/netns)"

# Names and a private /24 of our own (two runs at once do not meet).
tag=fo$$
ns=("${tag}a" "${tag}b")
net=10.231.$(($$ % 250)).
addr=("${net}1" "${net}2")
# ip netns add makes /run/netns and binds it onto itself (once per boot, and ip netns
# del never undoes it): whatever of that this run made, it unmakes.
netns_dir_existed=false netns_dir_mounted=false
[ -d /run/netns ] && netns_dir_existed=true
mountpoint -q /run/netns 2>/dev/null && netns_dir_mounted=true
work=""
teardown() {
  for n in "${ns[@]}"; do
    pids=$(ip netns pids "$n" 2>/dev/null || true)
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    ip netns del "$n" 2>/dev/null || true
  done
  # Only when no other namespace lives there: another run's would go with the mount.
  if [ -d /run/netns ] && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
    if ! $netns_dir_mounted && mountpoint -q /run/netns 2>/dev/null; then umount /run/netns 2>/dev/null || true; fi
    $netns_dir_existed || rmdir /run/netns 2>/dev/null || true
  fi
  [ -z "$work" ] || rm -rf "$work"
}
trap teardown EXIT
trap 'exit 130' INT TERM
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-netns.XXXXXX")

# Any step still refused (a kernel or container that allowed the tries above but not
# this) skips, and the trap takes down what was made.
make_link() {
  ip netns add "${ns[0]}" && ip netns add "${ns[1]}" &&
    ip link add "${tag}x" type veth peer name "${tag}y" &&
    ip link set "${tag}x" netns "${ns[0]}" && ip link set "${tag}y" netns "${ns[1]}" &&
    ip -n "${ns[0]}" link set "${tag}x" name fveth0 && ip -n "${ns[1]}" link set "${tag}y" name fveth0 &&
    ip -n "${ns[0]}" addr add "${addr[0]}/24" dev fveth0 && ip -n "${ns[1]}" addr add "${addr[1]}/24" dev fveth0 &&
    for n in "${ns[@]}"; do ip -n "$n" link set lo up && ip -n "$n" link set fveth0 up || return 1; done
}
make_link 2>"$work/ip.err" || skip "could not make two network namespaces and a veth link here: $(head -n 1 "$work/ip.err")"
ip netns exec "${ns[1]}" true || skip "ip netns exec failed here"

# 1 Gbit/s each way, with 50 us each way (a switch hop) where the kernel has netem;
# else the rate alone (tbf).
shape() {
  command -v tc >/dev/null || { echo "(no tc: the link is not shaped)"; return 1; }
  local n
  if tc -n "${ns[0]}" qdisc replace dev fveth0 root netem delay 50us rate 1gbit limit 100000 2>/dev/null; then
    for n in "${ns[@]}"; do tc -n "$n" qdisc replace dev fveth0 root netem delay 50us rate 1gbit limit 100000; done
    echo "link shaped (netem): 1 Gbit/s, 50 us each way"
  else
    for n in "${ns[@]}"; do tc -n "$n" qdisc replace dev fveth0 root tbf rate 1gbit burst 256kb latency 10ms || return 1; done
    echo "link shaped (tbf; this kernel has no netem, so no added latency): 1 Gbit/s"
  fi
}

# The rsh agent: "host command..." runs the command in that host's namespace.
cat >"$work/agent" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in ${addr[0]}) n=${ns[0]} ;; ${addr[1]}) n=${ns[1]} ;; *) echo "agent: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$n" /bin/sh -c "\$*"
EOF
chmod +x "$work/agent"
printf '%s slots=1\n%s slots=1\n' "${addr[0]}" "${addr[1]}" >"$work/hosts"
mpi=(ip netns exec "${ns[0]}" mpirun --allow-run-as-root -np 2 --hostfile "$work/hosts" --map-by node
     --mca plm_rsh_agent "$work/agent" --mca btl tcp,self --mca btl_tcp_if_include "${net}0/24"
     --mca oob_tcp_if_include "${net}0/24"
     --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3)
head -c 40000 "$here/data/tinyshakespeare.txt" >"$work/corpus.txt"

# Ends within `bound` seconds of the fault (non-zero), checkpoint intact.
ends_within() {  # ends_within BOUND LAUNCHER_PID WHAT
  local bound=$1 launcher=$2 what=$3 start=$SECONDS status=0
  while kill -0 "$launcher" 2>/dev/null && ((SECONDS - start < bound)); do sleep 0.2; done
  if kill -0 "$launcher" 2>/dev/null; then echo "FAILED: the job still runs $bound s after $what"; exit 1; fi
  wait "$launcher" || status=$?
  echo "the job ended $((SECONDS - start)) s after $what, exit $status"
  [ "$status" -ne 0 ] || { echo "FAILED: exit 0 after $what"; exit 1; }
}

run_test() {
  local model=(--data "$work/corpus.txt" --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --eval-iters 3
               --dropout 0 --threads 1 --quiet)
  local common=("${model[@]}" --batch-size 5 --eval-interval 10 --max-iters 20)
  echo "== 1. ($SECONDS s) two ranks in two namespaces against one process"
  shape || true
  "$folio" train "${common[@]}" --out "$work/one"
  "${mpi[@]}" "$folio" train "${common[@]}" --out "$work/two"
  "${mpi[@]}" "$folio" train "${common[@]}" --overlap off --out "$work/two-after"
  "$python" "$here/tests/compare_weights.py" "$work/one" "$work/two" 1e-4
  "$python" "$here/tests/compare_weights.py" "$work/two" "$work/two-after" 0

  local long=("${model[@]}" --batch-size 6 --max-iters 100000000 --eval-interval 20 --comm-timeout 5)
  wait_for_checkpoint() {
    for _ in $(seq 300); do [ -s "$1/state.safetensors" ] && return; sleep 0.1; done
    echo "FAILED: no checkpoint after 30 s"; cat "$2"; exit 1
  }
  echo "== 2. ($SECONDS s) the rank in the second namespace killed"
  "${mpi[@]}" "$folio" train "${long[@]}" --out "$work/kill" >"$work/kill.out" 2>&1 &
  local launcher=$!
  wait_for_checkpoint "$work/kill" "$work/kill.out"
  local victim
  victim=$(for p in $(ip netns pids "${ns[1]}"); do [ "$(cat /proc/"$p"/comm 2>/dev/null)" = folio ] && echo "$p"; done)
  [ -n "$victim" ] || { echo "FAILED: no folio rank in ${ns[1]}"; exit 1; }
  kill -KILL $victim
  ends_within 30 "$launcher" "the kill"
  "$folio" info --checkpoint "$work/kill" >/dev/null || { echo "FAILED: the checkpoint does not load"; exit 1; }
  echo "the checkpoint loads"

  echo "== 3. ($SECONDS s) the link cut"
  "${mpi[@]}" "$folio" train "${long[@]}" --out "$work/cut" >"$work/cut.out" 2>&1 &
  launcher=$!
  wait_for_checkpoint "$work/cut" "$work/cut.out"
  ip -n "${ns[1]}" link set fveth0 down
  ends_within 30 "$launcher" "the cut"
  grep -q "no answer from the other ranks" "$work/cut.out" || { echo "FAILED: no message"; cat "$work/cut.out"; exit 1; }
  grep "^\[mpi\]" "$work/cut.out" | head -n 1
  "$folio" info --checkpoint "$work/cut" >/dev/null || { echo "FAILED: the checkpoint does not load"; exit 1; }
  echo "the checkpoint loads"
  echo "namespace tests passed ($SECONDS s)"
}

# One line per run: ms/step (mean over the run's steps, rank 0's clock) and the
# all-reduce time each rank waited for, not hidden behind backward (ms/step).
run_bench() {
  local steps=${1:-6} reps=${2:-2}
  shape || { echo "bench: needs tc to shape the link"; exit 1; }
  local m=(--data "$here/data/tinyshakespeare.txt" --n-layer 6 --n-head 6 --n-embd 384 --block-size 256
           --batch-size 64 --dropout 0.2 --max-iters "$steps" --eval-interval "$steps" --eval-iters 1
           --log-interval 1000000 --threads 1 --comm-timeout 600)
  one() {  # one LAYOUT -> "step_ms waited_ms_rank0 waited_ms_rank1"
    local out=$work/m
    rm -rf "$out"
    case $1 in
      1rank) ip netns exec "${ns[0]}" "$folio" train "${m[@]}" --out "$out" >"$work/log" 2>&1 ;;
      on) "${mpi[@]}" "$folio" train "${m[@]}" --overlap on --out "$out" >"$work/log" 2>&1 ;;
      off) "${mpi[@]}" "$folio" train "${m[@]}" --overlap off --out "$out" >"$work/log" 2>&1 ;;
    esac
    local step
    step=$(awk -F, 'NR > 1 { t = $8 } END { printf "%.0f", 1000 * t / '"$steps"' }' "$out/log.csv")  # train_s
    local waited
    waited=$( (grep -o 'all-reduce [0-9.]* ms/step not hidden' "$work/log" || true) | awk '{ printf "%.0f ", $2 }')
    echo "$step ${waited:--}"
  }
  echo "config M, $steps steps a run, 1 thread a rank, $(nproc) cores; ranks in 2 namespaces over TCP"
  echo "layout                 ms/step   all-reduce not hidden, ms/step (rank 0, rank 1)"
  for rep in $(seq "$reps"); do
    local off_wait=0 on_wait=0 off_step=0 on_step=0
    for layout in 1rank off on; do
      read -r step w0 w1 < <(one "$layout")
      printf "%-22s %7s   %s %s\n" "$( case $layout in 1rank) echo "1 rank" ;; off) echo "2 ranks, overlap off" ;;
                                        on) echo "2 ranks, overlap on" ;; esac)" "$step" "${w0:-}" "${w1:-}"
      case $layout in
        off) off_wait=$(( (w0 + w1) / 2 )) off_step=$step ;;
        on) on_wait=$(( (w0 + w1) / 2 )) on_step=$step ;;
      esac
    done
    awk -v a="$off_wait" -v b="$on_wait" -v sa="$off_step" -v sb="$on_step" 'BEGIN {
      printf "hidden by overlap: %d of %d ms/step of all-reduce wait (%.0f %%); step %d -> %d ms\n",
             a - b, a, (a > 0 ? 100 * (a - b) / a : 0), sa, sb }'
  done
}

case $mode in
  test) run_test ;;
  bench) run_bench "${3:-6}" "${4:-2}" ;;
  *) echo "usage: netns-mpi.sh test|bench FOLIO [STEPS] [REPS]" >&2; exit 2 ;;
esac
