#!/usr/bin/env bash
# One folio training-step measurement in its own process, printed as one JSON line with
# the fields torch_gpt.py prints (impl, config, threads, dtype, tokens_per_sec, ms_per_step,
# gflops, peak_rss_mb, ...), so that compare.sh can put the two side by side.
#
#   bench/peer/folio_step.sh [--dtype fp32|bf16] CONFIG THREADS [BENCH_MODEL]
#
# CONFIG is T, S or M; BENCH_MODEL defaults to build-peer/bench/bench_model. It runs
# bench_model's TrainStep/<CONFIG> (--dtype fp32, the default) or TrainStepBf16/<CONFIG>
# (--dtype bf16: every matrix product in bf16, fp32 sums and outputs) -- GPT forward +
# backward + clip_grad_norm 1.0 + AdamW step + zero_grad, after 2 warm-up steps; T and S:
# as many steps as Google Benchmark's 0.5 s minimum takes, M: 2 steps -- with
# --threads=THREADS and OMP_NUM_THREADS=THREADS.
# Peak RSS is the process's ru_maxrss, from /usr/bin/time -f %M when that exists, else
# from the "peak RSS" line bench_model prints to stderr at exit.
# A bench_model without that benchmark (built before it existed) gives a JSON line with
# "error": "not supported: ..." and exit status 0, as torch_gpt.py does for bf16.
set -euo pipefail
dtype=fp32 positional=()
while (($#)); do
  case $1 in
    --dtype) (($# >= 2)) || { echo "folio_step.sh: --dtype needs fp32 or bf16" >&2; exit 2; }
             dtype=$2; shift ;;
    --dtype=*) dtype=${1#--dtype=} ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "folio_step.sh: unknown option '$1' (--help says how to call it)" >&2; exit 2 ;;
    *) positional+=("$1") ;;
  esac
  shift
done
set -- "${positional[@]}"
cfg=${1:?config T, S or M}
threads=${2:?thread count}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${3:-$here/../../build-peer/bench/bench_model}
py=${PYTHON:-/usr/bin/python3}
[[ -x $py ]] || py=python3
case $cfg in T | S | M) ;; *) echo "folio_step.sh: config must be T, S or M, got '$cfg'" >&2; exit 2 ;; esac
case $dtype in
  fp32) bench=TrainStep ;;
  bf16) bench=TrainStepBf16 ;;
  *) echo "folio_step.sh: --dtype must be fp32 or bf16, got '$dtype'" >&2; exit 2 ;;
esac
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "folio_step.sh: THREADS must be a positive integer, got '$threads'" >&2; exit 2; }
[[ -x $bin ]] || { echo "folio_step.sh: no bench_model at $bin (build it first)" >&2; exit 2; }
listed=$("$bin" --benchmark_list_tests --benchmark_filter="^$bench/$cfg/" 2>/dev/null) ||
  { echo "folio_step.sh: $bin --benchmark_list_tests failed" >&2; exit 1; }
if [[ -z $listed ]]; then
  "$py" -c 'import json, sys; c, t, d, b, n = sys.argv[1:]; print(json.dumps({"impl": "folio", "config": c,
    "threads": int(t), "dtype": d, "error": f"not supported: {b} has no {n} benchmark (built before it existed?)"}))' \
    "$cfg" "$threads" "$dtype" "$bin" "$bench/$cfg"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmd=(env OMP_NUM_THREADS="$threads" "$bin" --threads="$threads"
     --benchmark_filter="^$bench/$cfg/" --benchmark_out="$tmp/out.json" --benchmark_out_format=json)
# (--benchmark_out, not --benchmark_format=json: bench_model reads the display format
# after benchmark::Initialize has taken that flag out of argv, so it prints the console
# format whatever --benchmark_format says.)
if [[ -x /usr/bin/time ]]; then
  /usr/bin/time -o "$tmp/rss" -f %M "${cmd[@]}" >"$tmp/console" 2>"$tmp/err"
else
  "${cmd[@]}" >"$tmp/console" 2>"$tmp/err"
fi

"$py" - "$cfg" "$threads" "$tmp" "$dtype" "$bench" <<'EOF'
import json, os, re, sys
cfg, threads, tmp, dtype, bench = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
configs = {"T": (2, 4, 64, 32, 16, 0.0), "S": (4, 4, 128, 64, 12, 0.0), "M": (6, 6, 384, 256, 64, 0.2)}
L, H, C, T, B, drop = configs[cfg]
data = json.load(open(os.path.join(tmp, "out.json")))
runs = [b for b in data["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
if len(runs) != 1:
    sys.exit(f"folio_step.sh: expected one {bench}/{cfg} run, got {[b['name'] for b in runs]}")
b = runs[0]
scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
ms = b["real_time"] * scale
err = open(os.path.join(tmp, "err")).read()
m = re.search(r"threads: (\d+), peak RSS ([\d.]+) MB", err)
rss_file = os.path.join(tmp, "rss")
if os.path.exists(rss_file) and open(rss_file).read().strip().splitlines():
    rss = int(open(rss_file).read().strip().splitlines()[-1]) / 1024.0
    rss_from = "/usr/bin/time %M"
else:
    rss, rss_from = (float(m.group(2)) if m else None), "bench_model stderr"
print(json.dumps({
    "impl": "folio", "config": cfg, "threads": threads, "dtype": dtype,
    "folio_threads": int(m.group(1)) if m else data["context"].get("folio_threads"),
    "n_layer": L, "n_head": H, "n_embd": C, "block": T, "batch": B, "dropout": drop,
    "steps": b["iterations"], "ms_per_step": ms,
    "tokens_per_sec": b["tokens/s"], "gflops": b["GFLOP/s"],
    "peak_rss_mb": rss, "peak_rss_from": rss_from,
    "pool_fresh": b.get("pool_fresh"), "dnnl_new_prims": b.get("dnnl_new_prims"),
    "heap_allocs": b.get("heap_allocs"), "bench_name": b["name"],
    "load_avg": data["context"].get("load_avg"),
}))
EOF
