#!/usr/bin/env python3
"""Where a bench_model training step's time goes, from `perf record` and ONEDNN_VERBOSE.

  ONEDNN_JIT_PROFILE=2 perf record -F 499 -o step.data \\
      build/bench/bench_model --threads=2 --benchmark_filter='^TrainStepBf16/M/'
  python3 bench/bench_model_profile.py perf step.data        # the table of classes
  ONEDNN_VERBOSE=1 build/bench/bench_model --threads=2 --benchmark_filter='^TrainStepBf16/M/' > v.txt
  python3 bench/bench_model_profile.py verbose v.txt        # the products, by kernel and shape

`perf`: every sample (all threads, on-CPU time) is put in one class by the first rule
its DSO and symbol match; oneDNN's generated kernels are anonymous code ("[JIT]"
without ONEDNN_JIT_PROFILE=2, which writes /tmp/perf-PID.map to name them), and nothing
else in folio generates code, so JIT samples are the matrix products. The process's
whole life is sampled: model initialisation and the warm-up steps' first touch of
fresh memory are listed as their own classes, not hidden in "framework".
`verbose`: oneDNN 2.x prints one line per primitive execution with its kernel and its
time in ms; the sum over a run, by kernel, with the product's FLOPs where the line
names the shapes.
"""
import collections
import re
import subprocess
import sys

# (class, pattern on "dso<TAB>symbol"), first match wins.
RULES = [
    ("products (oneDNN)", r"^\[JIT\]|libdnnl|brgemm|jit_|dnnl::"),
    ("conversions fp32->bf16 (with the gradient's mask and bias sums)",
     r"to_bf16|convert_native|kernels::convert$|gradient_columns"),
    ("attention (fused)", r"each_slice|attention_tiles|drop_rows|softmax_rows|forward_slice|backward_slice|"
                                r"causal_attention|pad_transposed|unpad"),
    ("norms", r"layer_norm|rms_norm"),
    ("activations, dropout", r"dropout|gelu|relu|swiglu|silu|linear_op.*lambda\(float, float\)"),
    ("bias gradients (column sums)", r"_Function_handler.*linear_op|add_column_sums"),
    ("residual adds, other elementwise", r"flat_map|binary<|folio::add|folio::mul"),
    ("loss, embedding, head", r"cross_entropy|softmax_row|embedding|log_fma|logf|expf"),
    ("optimizer, clipping", r"AdamW|adamw|clip_grad|sum_squares"),
    ("model initialisation (not a step)", r"Rng::|Arena::normal|sincos|RotaryTables"),
    ("first touch of fresh memory (kernel)", r"kernel.*(page|fault|_mm_|memcg|rmap|pte|lru|folio|mas_walk|"
                                             r"alloc_pages|freelist|rmqueue|charge|vma|swap)"),
    ("idle threads (OpenMP waits, scheduler)", r"libgomp|kernel.*(sched|switch|spin|idle|futex|irq|softirq)"),
    ("framework (graph, pool, malloc, copies)", r"."),
]


def classify(dso_sym):
    for name, pattern in RULES:
        if re.search(pattern, dso_sym):
            return name
    return RULES[-1][0]


def perf_table(data):
    out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso,sym",
                          "-F", "overhead,dso,sym", "--percent-limit", "0", "-t", "\t"],
                         capture_output=True, text=True, check=True).stdout
    classes = collections.Counter()
    top = collections.defaultdict(list)
    for line in out.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        pct = float(parts[0].strip().rstrip("%"))
        dso_sym = parts[1].strip() + "\t" + parts[2].strip()
        c = classify(dso_sym)
        classes[c] += pct
        top[c].append((pct, re.sub(r"\s+", " ", parts[2].strip())[:90]))
    print("| class | share of samples | largest symbols |")
    print("|---|---:|---|")
    for name, pct in classes.most_common():
        biggest = ", ".join(f"`{s}` {p:.1f}" for p, s in sorted(top[name], reverse=True)[:2])
        print(f"| {name} | {pct:.1f} % | {biggest} |")


def verbose_table(path):
    by_kernel = collections.Counter()
    calls = collections.Counter()
    flops = collections.Counter()
    for line in open(path, errors="replace"):
        if not line.startswith("onednn_verbose,exec"):
            continue
        f = line.rstrip().split(",")
        kind, impl, shapes, ms = f[3], f[4], f[-2], float(f[-1])
        key = f"{kind} {impl} {shapes}"
        by_kernel[key] += ms
        calls[key] += 1
        m = re.match(r"(?:(\d+)x)?(\d+)x(\d+):(?:\d+x)?(\d+)x(\d+)", shapes)  # [b x] M x K : [b x] K x N
        if m:
            b, M, K, N = int(m.group(1) or 1), int(m.group(2)), int(m.group(3)), int(m.group(5))
            flops[key] += 2.0 * b * M * K * N
    total = sum(by_kernel.values())
    print(f"| primitive, implementation, shapes (src:wei:dst) | calls | ms (sum over threads) | share | GFLOP/s while running |")
    print("|---|---:|---:|---:|---:|")
    for key, ms in by_kernel.most_common():
        rate = f"{flops[key] / ms / 1e6:.0f}" if flops[key] and ms > 0 else ""
        print(f"| {key} | {calls[key]} | {ms:.0f} | {100 * ms / total:.1f} % | {rate} |")
    print(f"| all | {sum(calls.values())} | {total:.0f} | | |")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("perf", "verbose"):
        sys.exit("usage: bench_model_profile.py perf PERF.DATA | verbose ONEDNN_VERBOSE_OUTPUT")
    perf_table(sys.argv[2]) if sys.argv[1] == "perf" else verbose_table(sys.argv[2])
