#!/usr/bin/env bash
# folio against PyTorch on the identical model and training step, side by side.
#
#   bash bench/peer/compare.sh [options]
#
# Installs what is missing through scripts/setup.sh (folio's build packages, and
# python3-torch and libopenblas0-openmp, with apt-get as root or through sudo), builds
# build-peer/bench/bench_model, points torch at OpenBLAS's OpenMP build, then for every
# config, thread count and dtype runs folio (bench/peer/folio_step.sh: bench_model's
# TrainStep/<cfg>, or TrainStepBf16/<cfg> for bf16) and torch (bench/peer/torch_gpt.py,
# for bf16 under torch.autocast("cpu", dtype=torch.bfloat16)), each in its own process,
# alternating, --reps times, and prints a markdown table of the medians (a dtype column)
# and, with both dtypes, one of the ratios per config and thread count: folio/torch in
# fp32 and in bf16, folio's bf16/fp32 and torch's bf16/fp32. A side that cannot run bf16
# here gives a "not supported: ..." line instead of a measurement, and the run goes on.
#
# Options:
#   --configs LIST     configs, comma-separated, of T, S, M          (default T,S,M)
#   --threads LIST     thread counts, comma-separated                 (default 1,2)
#   --m-threads LIST   thread counts for M only                       (default: --threads)
#   --dtypes LIST      dtypes, comma-separated, of fp32, bf16         (default fp32,bf16)
#   --skip-m           leave config M out
#   --reps N           alternations folio, torch (>= 1)               (default 3)
#   --m-steps N        timed torch steps for M (folio's bench_model times 2) (default 2)
#   --min-time S       torch: timed seconds for T and S (at least 3 steps) (default 1.0)
#   --wait-quiet S     before each run, wait up to S seconds for the other processes on
#                      the machine to use less than 0.25 of a core    (default 120; 0: off)
#   --torch-avx512     ATEN_CPU_CAPABILITY=avx512 for torch (its own kernels default to
#                      AVX2 on this build); fp32 matrix products are OpenBLAS's either
#                      way, bf16 ones (autocast) oneDNN's
#   --foreach          torch.optim.AdamW(foreach=True) instead of 1.13's per-tensor loop
#   --activation A     torch's feed-forward activation, gelu or relu (default: the one
#                      bench_model's TrainStep uses, read from the sources: GPTConfig's
#                      default in nn/transformer.h, unless bench_model.cpp sets one)
#   --no-install       install nothing; --no-build: use build-peer as it is
#   --out DIR          where results.jsonl and the logs go (default build-peer/peer-<time>)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
peer=$repo/bench/peer
build=$repo/build-peer
py=/usr/bin/python3  # Debian's python3 (python3-torch); a pyenv python3 on PATH has no torch
blasdir=/usr/lib/x86_64-linux-gnu/openblas-openmp

configs=T,S,M threads=1,2 m_threads="" dtypes=fp32,bf16 reps=3 m_steps=2 min_time=1.0 wait_quiet=120
torch_avx512=0 foreach=0 install=1 do_build=1 out="" activation=""
while (($#)); do
  case $1 in
    --configs) configs=$2; shift ;;
    --threads) threads=$2; shift ;;
    --m-threads) m_threads=$2; shift ;;
    --dtypes) dtypes=$2; shift ;;
    --skip-m) configs=$(tr ',' '\n' <<<"$configs" | grep -vx M | paste -sd, -) ;;
    --reps) reps=$2; shift ;;
    --m-steps) m_steps=$2; shift ;;
    --min-time) min_time=$2; shift ;;
    --wait-quiet) wait_quiet=$2; shift ;;
    --torch-avx512) torch_avx512=1 ;;
    --foreach) foreach=1 ;;
    --activation) activation=$2; shift ;;
    --no-install) install=0 ;;
    --no-build) do_build=0 ;;
    --out) out=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare.sh: unknown option '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --reps must be a positive integer" >&2; exit 2; }
[[ -n $configs ]] || { echo "compare.sh: no configs left to run" >&2; exit 2; }
[[ $dtypes =~ ^(fp32|bf16)(,(fp32|bf16))*$ ]] ||
  { echo "compare.sh: --dtypes must list fp32 and/or bf16, comma-separated, got '$dtypes'" >&2; exit 2; }
m_threads=${m_threads:-$threads}

# --- install ---------------------------------------------------------------------------
if ((install)); then
  bash "$repo/scripts/setup.sh" python3-torch libopenblas0-openmp
fi
[[ -x $py ]] && "$py" -c 'import torch' 2>/dev/null ||
  { echo "compare.sh: $py cannot import torch (install python3-torch, or drop --no-install)" >&2; exit 1; }
[[ -e $blasdir/libblas.so.3 ]] ||
  { echo "compare.sh: no $blasdir/libblas.so.3 (install libopenblas0-openmp)" >&2; exit 1; }

# --- build -----------------------------------------------------------------------------
if ((do_build)); then
  cmake -S "$repo" -B "$build" -DFOLIO_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build" -j2 --target bench_model
fi
[[ -x $build/bench/bench_model ]] || { echo "compare.sh: no $build/bench/bench_model" >&2; exit 1; }

out=${out:-$build/peer-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
results=$out/results.jsonl
: >"$results"

# torch's environment: OpenBLAS's OpenMP build ahead of whatever libblas.so.3 the
# alternatives system selects (the netlib reference BLAS is slow), and no forced core
# type (OPENBLAS_CORETYPE=Haswell would force AVX2 kernels on an AVX-512 machine).
torch_env=(env -u OPENBLAS_CORETYPE "LD_LIBRARY_PATH=$blasdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
((torch_avx512)) && torch_env+=(ATEN_CPU_CAPABILITY=avx512)
# The activation folio's TrainStep runs: bench_model.cpp builds its GPTConfig without an
# activation unless it names one, so GPTConfig's default in nn/transformer.h decides.
folio_act=$(grep -o 'activation *= *[a-z:]*Activation::[a-z]*' "$repo/bench/bench_model.cpp" | head -1 | sed 's/.*:://' || true)
act_from="bench/bench_model.cpp"
if [[ -z $folio_act ]]; then
  folio_act=$(grep -o 'Activation activation *= *[a-z:]*Activation::[a-z]*' "$repo/nn/transformer.h" | head -1 | sed 's/.*:://' || true)
  act_from="GPTConfig's default in nn/transformer.h"
fi
[[ $folio_act == gelu || $folio_act == relu ]] ||
  { echo "compare.sh: cannot tell which activation bench_model uses (got '$folio_act'); pass --activation" >&2
    [[ -n $activation ]] || exit 1; }
activation=${activation:-$folio_act}
[[ $activation == gelu || $activation == relu ]] || { echo "compare.sh: --activation gelu or relu" >&2; exit 2; }
torch_args=(--activation "$activation")
((foreach)) && torch_args+=(--foreach)

# --- machine facts ---------------------------------------------------------------------
ncpu=$(nproc)
echo "## Machine"
echo
echo "- nproc: $ncpu; CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1)" \
  "(family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p'));" \
  "AVX-512: $(grep -q avx512f /proc/cpuinfo && echo yes || echo no);" \
  "AVX512-BF16: $(grep -q avx512_bf16 /proc/cpuinfo && echo yes || echo "no (bf16 rows measure emulated bf16 products)");" \
  "kernel $(uname -r)"
echo "- torch: $("$py" -c 'import torch; print(torch.__version__)') (Debian python3-torch" \
  "$(dpkg-query -W -f='${Version}' python3-torch)), $("${torch_env[@]}" "$py" -c \
  'import torch; print("ATen CPU capability", torch.__config__.show().split("CPU capability usage:")[1].split(chr(10))[0].strip())')"
echo "- libblas.so.3 alternative: $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)" \
  "(torch runs with LD_LIBRARY_PATH=$blasdir either way)"
echo "- folio: $build/bench/bench_model links $(ldd "$build/bench/bench_model" |
  awk '/dnnl|gomp|blas/ {print $1}' | paste -sd' ' -) ($(dpkg-query -W -f='libdnnl ${Version}' libdnnl2 2>/dev/null || true))"
echo "- activation: folio's TrainStep uses ${folio_act:-?} ($act_from); torch runs $activation" \
  "$([[ $activation == "$folio_act" ]] && echo "(the same)" || echo "(NOT the same: the comparison is off)")"
echo "- OPENBLAS_CORETYPE in this shell: ${OPENBLAS_CORETYPE:-unset} (unset for torch)"
echo "- parameter counts (torch twin against folio's GPTConfig::parameter_count):"
"$py" "$peer/torch_gpt.py" --check | sed 's/^/  - /'
echo

# Cores busy with other work over one second, from /proc/stat.
busy_cores() {
  local a b
  read -r -a a < <(grep '^cpu ' /proc/stat)
  sleep 1
  read -r -a b < <(grep '^cpu ' /proc/stat)
  local tot=0 idle i
  for i in 1 2 3 4 5 6 7 8; do tot=$((tot + b[i] - a[i])); done
  idle=$((b[4] - a[4] + b[5] - a[5]))
  awk -v t="$tot" -v i="$idle" -v n="$ncpu" 'BEGIN { printf "%.2f", t ? (t - i) / t * n : 0 }'
}
wait_quiet() {
  local waited=0 b
  b=$(busy_cores)
  while ((wait_quiet > 0)) && awk -v b="$b" 'BEGIN { exit !(b >= 0.25) }'; do
    if ((waited >= wait_quiet)); then
      echo "   (still $b cores busy with other work after ${waited}s: measuring anyway)" >&2
      break
    fi
    sleep 4; waited=$((waited + 5))
    b=$(busy_cores)
  done
  echo "$b"
}

# Busy jiffies of the whole machine (user nice system irq softirq steal), from /proc/stat.
busy_jiffies() {
  local a
  read -r -a a < <(grep '^cpu ' /proc/stat)
  echo $((a[1] + a[2] + a[3] + a[6] + a[7] + a[8]))
}
hz=$(getconf CLK_TCK)

run_one() {  # impl cfg threads dtype rep
  local impl=$1 cfg=$2 th=$3 dtype=$4 rep=$5 quiet line j0 j1 timer=()
  quiet=$(wait_quiet)
  # The run's own CPU time and wall time (children included), so that what the rest of
  # the machine used meanwhile is the busy time /proc/stat counted minus the run's own.
  rm -f "$out/time.txt"
  [[ -x /usr/bin/time ]] && timer=(/usr/bin/time -o "$out/time.txt" -f "%e %U %S")
  j0=$(busy_jiffies)
  if [[ $impl == folio ]]; then
    line=$("${timer[@]}" "$peer/folio_step.sh" --dtype "$dtype" "$cfg" "$th" "$build/bench/bench_model" 2>>"$out/errors.log") ||
      { echo "compare.sh: folio $cfg t$th $dtype failed; $out/errors.log:" >&2; tail -5 "$out/errors.log" >&2; exit 1; }
  else
    local steps=()
    [[ $cfg == M ]] && steps=(--steps "$m_steps")
    line=$(OMP_NUM_THREADS=$th "${timer[@]}" "${torch_env[@]}" "$py" "$peer/torch_gpt.py" --config "$cfg" \
           --threads "$th" --dtype "$dtype" --warmup 2 --min-time "$min_time" "${steps[@]}" "${torch_args[@]}" \
           2>>"$out/errors.log") ||
      { echo "compare.sh: torch $cfg t$th $dtype failed; $out/errors.log:" >&2; tail -5 "$out/errors.log" >&2; exit 1; }
  fi
  j1=$(busy_jiffies)
  line=$("$py" - "$line" "$rep" "$quiet" "$((j1 - j0))" "$hz" "$out/time.txt" <<'EOF'
import json, os, sys
r = json.loads(sys.argv[1])
r["rep"], r["busy_before"] = int(sys.argv[2]), float(sys.argv[3])
busy_s, timef = int(sys.argv[4]) / float(sys.argv[5]), sys.argv[6]
if os.path.exists(timef):
    wall, user, system = (float(v) for v in open(timef).read().split()[-3:])
    r["run_wall_s"], r["run_cpu_s"] = wall, user + system
    r["busy_during"] = max(0.0, (busy_s - user - system) / wall) if wall > 0 else None
print(json.dumps(r))
EOF
)
  echo "$line" >>"$results"
  "$py" - "$line" <<'EOF'
import json, sys
r = json.loads(sys.argv[1])
head = "   rep %d %s t%d %s %-5s" % (r["rep"], r["config"], r["threads"], r["dtype"], r["impl"])
if r.get("error"):
    print(f"{head} {r['error']}")
else:
    d = r.get("busy_during")
    print("%s %10.0f tok/s %9.2f ms/step %3d steps  peak RSS %4.0f MB  (other work, cores: %.2f before, %s during)"
          % (head, r["tokens_per_sec"], r["ms_per_step"], r["steps"], r["peak_rss_mb"], r["busy_before"],
             "?" if d is None else "%.2f" % d))
EOF
}

echo "## Runs (results: $results)"
echo
for rep in $(seq 1 "$reps"); do
  for cfg in ${configs//,/ }; do
    th_list=$threads
    [[ $cfg == M ]] && th_list=$m_threads
    for th in ${th_list//,/ }; do
      for dtype in ${dtypes//,/ }; do
        # Alternate which goes first, so neither always follows the other.
        if ((rep % 2)); then order=(folio torch); else order=(torch folio); fi
        for impl in "${order[@]}"; do run_one "$impl" "$cfg" "$th" "$dtype" "$rep"; done
      done
    done
  done
done

echo
"$py" - "$results" <<'EOF'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
t = next((r for r in rs if r["impl"] == "torch" and "blas" in r), None)
if t is None:
    sys.exit(0)  # no torch run measured anything (all "not supported")
print("## BLAS torch loaded (from /proc/self/maps of a torch run)\n")
for lib in t["blas"]:
    print(f"- {lib}")
print(f"- OpenBLAS: {t['openblas']}")
print(f"- torch threads {t['torch_threads']}, ATen CPU capability {t['cpu_capability']}, "
      f"AdamW foreach={t['adamw_foreach']}, torch {t['torch_version']}\n")
EOF
echo "## folio vs torch: training steps, $activation feed-forward, ${dtypes//,/ and } (medians of $reps alternations; ratio = folio tok/s / torch tok/s)"
echo
"$py" "$peer/table.py" "$results"
