#!/usr/bin/env bash
# Data parallelism across processes against threads, on this machine: tokens/s of
# `folio train` at configs S and M (bench_model's) for
#   1 rank x 1 thread,  1 rank x 2 threads,  2 ranks x 1 thread (mpirun)
# in one sitting, alternating, with the all-reduce time per step and each rank's peak
# memory. Tokens/s counts the steps between the first and the last evaluation (one
# batch each), so start-up and the first evaluation are left out.
#   bash bench/mpi.sh [STEPS_S] [STEPS_M] [REPS]      (default 200 40 2)
set -euo pipefail
cd "$(dirname "$0")/.."
steps_s=${1:-200}; steps_m=${2:-40}; reps=${3:-2}
folio=build/folio
[ -x "$folio" ] || bash scripts/build.sh folio_cli
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
declare -A args=(
  [S]="--n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12 --max-iters $steps_s"
  [M]="--n-layer 6 --n-head 6 --n-embd 384 --block-size 256 --batch-size 64 --dropout 0.2 --max-iters $steps_m")
declare -A tokens=([S]=$((12 * 64)) [M]=$((64 * 256)))

run() {  # run CONFIG LAYOUT -> prints "tokens/s all-reduce peak"
  local cfg=$1 layout=$2 out=$work/run
  rm -rf "$out"
  local iters=${args[$cfg]##*--max-iters }
  local common=(train ${args[$cfg]} --eval-interval "$iters" --eval-iters 1 --log-interval 1000000 --out "$out")
  case $layout in
    1x1) "$folio" "${common[@]}" --threads 1 >"$work/log" ;;
    1x2) "$folio" "${common[@]}" --threads 2 >"$work/log" ;;
    2x1) "${mpi[@]}" "$folio" "${common[@]}" --threads 1 >"$work/log" 2>"$work/err" ;;
  esac
  local t0 t1
  t0=$(sed -n 2p "$out/log.csv" | cut -d, -f6); t1=$(tail -n 1 "$out/log.csv" | cut -d, -f6)
  local tps; tps=$(awk -v n="$iters" -v k="${tokens[$cfg]}" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n * k / (b - a) }')
  local ar peak
  ar=$( (grep -o 'all-reduce [0-9.]* ms/step' "$work/log" || true) | awk '{ s += $2; n++ } END { if (n) printf "%.2f", s / n; else print "-" }')
  peak=$( (grep -o 'peak memory [0-9]* MiB' "$work/log" || true) | awk '{ print $3 }' | paste -sd/)
  echo "$tps $ar $peak"
}

echo "config layout  tokens/s  all-reduce ms/step  peak MiB (per rank)   [$(nproc) cores]"
for cfg in S M; do
  for rep in $(seq "$reps"); do
    for layout in 1x1 1x2 2x1; do
      read -r tps ar peak < <(run "$cfg" "$layout")
      printf "%-6s %-7s %8s  %18s  %s\n" "$cfg" "$layout" "$tps" "$ar" "$peak"
    done
  done
done
