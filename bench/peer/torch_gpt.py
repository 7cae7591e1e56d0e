#!/usr/bin/python3
"""PyTorch twin of folio's character-level GPT and of bench_model's TrainStep.

Run with Debian's python3-torch (1.13): /usr/bin/python3 bench/peer/torch_gpt.py --config S --threads 1

The model is folio's nn::GPT (nn/transformer.h, nn/attention.h, nn/layers.h):
  token + learned position embeddings -> dropout
  -> n_layer pre-LayerNorm Blocks: x + attn(ln1(x)), then x + ffwd(ln2(x))
       attn: packed key/query/value Linear (no bias), per head q k^T * head_size**-0.5,
             tril mask filled with -inf, softmax, dropout, @ v, heads concatenated,
             proj Linear (bias), dropout
       ffwd: Linear C->4C (bias), GELU (exact) or ReLU, Linear 4C->C (bias), dropout
  -> final LayerNorm -> lm_head Linear (bias) onto the vocabulary; mean cross-entropy.
Init: N(0, 0.02) for Linear and Embedding weights, zero biases, LayerNorm weight 1, bias 0.
Step (as bench_model's TrainStep): forward + loss, backward, clip_grad_norm_(1.0),
AdamW(lr 1e-4, betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on >= 2-D params only),
zero_grad(set_to_none=True). The batch is random token ids in [0, 65), fixed per run.
--dtype bf16 runs forward + loss under torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's
CPU mixed precision (backward outside it, as PyTorch documents; weights, gradients and
AdamW stay fp32): the matrix products (oneDNN bf16 kernels) have bf16 outputs, so the
attention's scale, mask, softmax, the activation and dropout run in bf16 too, while the
residual stream, the LayerNorms and the loss stay fp32. folio's TrainStepBf16 has fp32
outputs and keeps all but the products in fp32. Where this torch cannot run it, the JSON
line says "error": "not supported: ..." (and exit status 0) instead of timing anything.

Prints one JSON line: config, threads, dtype, tokens_per_sec, ms_per_step, gflops (effective:
3 x forward matmul FLOPs, the formula of bench_model.cpp), peak_rss_mb (ru_maxrss),
rss_after_import_mb, params, the BLAS libraries mapped into the process, and more.
"""
import argparse
import contextlib
import json
import os
import sys
import time

CONFIGS = {  # name: n_layer, n_head, n_embd, block, batch, dropout (bench_model.cpp's kConfigs)
    "T": (2, 4, 64, 32, 16, 0.0),
    "S": (4, 4, 128, 64, 12, 0.0),
    "M": (6, 6, 384, 256, 64, 0.2),
}
VOCAB = 65


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", choices=sorted(CONFIGS), default="S")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads and OMP_NUM_THREADS")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (bench_model makes 2)")
    p.add_argument("--steps", type=int, default=0,
                   help="timed steps; 0: as many as fit in --min-time (at least 3)")
    p.add_argument("--min-time", type=float, default=1.0, help="seconds, when --steps is 0")
    p.add_argument("--activation", choices=["gelu", "relu"], default="relu")  # folio's default
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                   help='bf16: forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)')
    p.add_argument("--foreach", action="store_true",
                   help="AdamW(foreach=True) (torch 1.13's default on CPU is the per-tensor loop)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--check", action="store_true",
                   help="check the parameter counts (config S: 816,705, GELU and ReLU) and exit")
    return p.parse_args()


def set_thread_env(threads):
    """Before torch (and so libgomp and OpenBLAS) is loaded: their thread pools read these."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["MKL_NUM_THREADS"] = str(threads)


# Run as a program, the options come first, so that the thread count is in the
# environment before torch loads; imported (torch_train.py), it parses nothing and the
# importer sets the environment itself.
if __name__ == "__main__":
    args = parse_args()
    set_thread_env(args.threads)

import resource  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

if __name__ == "__main__":
    torch.set_num_threads(args.threads)


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


RSS_AFTER_IMPORT = rss_mb()


class MultiHead(nn.Module):
    """n_head causal heads; their key/query/value Linears packed as one (3C, C) Linear."""

    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        self.n_head, self.head_size = n_head, n_embd // n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.n_head, self.head_size).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (B, nh, T, hs)
        wei = (q @ k.transpose(-2, -1)) * self.head_size ** -0.5  # (B, nh, T, T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        wei = self.attn_dropout(wei)
        y = (wei @ v).transpose(1, 2).reshape(B, T, C)  # heads side by side
        return self.resid_dropout(self.proj(y))


class FeedForward(nn.Module):
    def __init__(self, n_embd, dropout, activation):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_embd, 4 * n_embd),
                                 nn.GELU() if activation == "gelu" else nn.ReLU(),
                                 nn.Linear(4 * n_embd, n_embd), nn.Dropout(dropout))

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout, activation):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = MultiHead(n_embd, n_head, block_size, dropout)
        self.ln2 = nn.LayerNorm(n_embd)
        self.ffwd = FeedForward(n_embd, dropout, activation)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffwd(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, dropout, activation, vocab=VOCAB):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, n_embd)
        self.position_embedding = nn.Embedding(block_size, n_embd)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.Sequential(*[Block(n_embd, n_head, block_size, dropout, activation)
                                      for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
        # nn.LayerNorm already starts at weight 1, bias 0.

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, dtype=torch.long)
        x = self.dropout(self.token_embedding(idx) + self.position_embedding(pos))
        logits = self.lm_head(self.ln_f(self.blocks(x)))
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


def folio_parameter_count(n_layer, n_embd, block, vocab=VOCAB):
    """nn::GPTConfig::parameter_count() of transformer.cpp, with bias on."""
    C = n_embd
    attn = 3 * C * C + C * C + C
    ffwd = C * 4 * C + 4 * C + 4 * C * C + C
    per_block = attn + ffwd + 2 * 2 * C
    return vocab * C + block * C + n_layer * per_block + 2 * C + C * vocab + vocab


def forward_flops(n_layer, n_embd, block, batch, vocab=VOCAB):
    """bench_model.cpp's gpt_flops: forward matmul FLOPs, causal attention counted in full."""
    BT, C = float(batch) * block, float(n_embd)
    return n_layer * (24.0 * BT * C * C + 4.0 * BT * block * C) + 2.0 * batch * block * n_embd * vocab


def count(model):
    return sum(p.numel() for p in model.parameters())


def check():
    ok = True
    for act in ("relu", "gelu"):
        n = count(GPT(4, 4, 128, 64, 0.0, act))
        ok &= n == 816705
        print(f"config S, {act}: {n:,} parameters (expected 816,705)")
    for name, (L, H, C, blk, _, drop) in sorted(CONFIGS.items()):
        n, want = count(GPT(L, H, C, blk, drop, "gelu")), folio_parameter_count(L, C, blk)
        ok &= n == want
        print(f"config {name}: {n:,} parameters; folio's GPTConfig::parameter_count formula: {want:,}")
    return ok


def blas_libraries():
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            base = os.path.basename(path)
            if any(s in base for s in ("blas", "lapack", "mkl", "dnnl", "gomp", "omp")):
                libs.add(os.path.realpath(path))
    return sorted(libs)


def openblas_core():
    import ctypes
    for lib in blas_libraries():
        if "openblas" in os.path.basename(lib):
            try:
                h = ctypes.CDLL(lib)
                h.openblas_get_config.restype = ctypes.c_char_p
                h.openblas_get_corename.restype = ctypes.c_char_p
                return f"{h.openblas_get_config().decode()} (core {h.openblas_get_corename().decode()})"
            except (OSError, AttributeError):
                pass
    return None


def first_line(e):
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def bf16_autocast_problem():
    """Why torch.autocast("cpu", dtype=torch.bfloat16) cannot run this model's products
    here, or None. 1.13 raises for a CPU autocast dtype it does not know, but later
    versions warn and turn autocast off instead, so the probe also checks that the
    products really come out bf16."""
    import warnings
    a, w = torch.randn(4, 8), torch.randn(8, 8)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.autocast("cpu", dtype=torch.bfloat16):
                enabled = torch.is_autocast_cpu_enabled()
                got = {"linear": F.linear(a, w, torch.zeros(8)).dtype, "matmul": (a @ w).dtype,
                       "bmm": torch.bmm(a[None], w[None]).dtype}
    except (AttributeError, RuntimeError, TypeError) as e:
        return f"torch.autocast('cpu', dtype=torch.bfloat16) fails in torch {torch.__version__}: {first_line(e)}"
    said = "; ".join(first_line(c.message) for c in caught)
    if not enabled:
        return f"torch {torch.__version__} turns CPU autocast off for bfloat16{': ' + said if said else ''}"
    wrong = [f"{op} -> {str(d).replace('torch.', '')}" for op, d in got.items() if d != torch.bfloat16]
    if wrong:
        return f"torch {torch.__version__}'s CPU autocast leaves products outside bf16 ({', '.join(wrong)})"
    return None


def measure(step):
    """--warmup untimed steps, then --steps timed ones (or >= 3 filling --min-time):
    (seconds of each, total seconds, the last loss)."""
    for _ in range(args.warmup):
        step()
    times = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
        if args.steps:
            if len(times) >= args.steps:
                break
        elif len(times) >= 3 and time.perf_counter() - start >= args.min_time:
            break
    return times, time.perf_counter() - start, loss


def main():
    if args.check:
        sys.exit(0 if check() else 1)
    L, H, C, T, B, drop = CONFIGS[args.config]
    run = {"impl": "torch", "config": args.config, "threads": args.threads, "dtype": args.dtype,
           "n_layer": L, "n_head": H, "n_embd": C, "block": T, "batch": B, "dropout": drop,
           "activation": args.activation, "torch_version": torch.__version__}

    def unsupported(why):  # one JSON line that says so, instead of a measurement
        print(json.dumps({**run, "error": f"not supported: {why}"}), flush=True)

    autocast = contextlib.nullcontext
    if args.dtype == "bf16":
        problem = bf16_autocast_problem()
        if problem:
            return unsupported(problem)
        autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    torch.manual_seed(args.seed)
    model = GPT(L, H, C, T, drop, args.activation)
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt_kwargs = dict(lr=1e-4, betas=(0.9, 0.99), eps=1e-8)
    if args.foreach:
        opt_kwargs["foreach"] = True
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], **opt_kwargs)
    params = list(model.parameters())
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, VOCAB, (B, T), generator=g)
    y = torch.randint(0, VOCAB, (B, T), generator=g)

    def step():
        with autocast():  # forward and loss only; backward runs outside, on the ops it recorded
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    try:
        times, total, loss = measure(step)
    except RuntimeError as e:  # an op autocast hands bf16 that this build cannot run
        if args.dtype == "fp32":
            raise
        return unsupported(f"a training step under bf16 autocast fails in torch {torch.__version__}: {first_line(e)}")
    n = len(times)
    ms = 1e3 * total / n
    flops = 3.0 * forward_flops(L, C, T, B)
    print(json.dumps({
        **run, "torch_threads": torch.get_num_threads(), "omp_num_threads": os.environ["OMP_NUM_THREADS"],
        "params": count(model), "warmup": args.warmup, "steps": n, "ms_per_step": ms,
        "ms_per_step_min": 1e3 * min(times), "ms_per_step_median": 1e3 * sorted(times)[n // 2],
        "tokens_per_sec": B * T / (ms / 1e3), "gflops": flops / (ms / 1e3) / 1e9,
        "peak_rss_mb": rss_mb(), "rss_after_import_mb": RSS_AFTER_IMPORT, "final_loss": float(loss),
        "cpu_capability": torch.__config__.show().split("CPU capability usage:")[1].split("\n")[0].strip(),
        "adamw_foreach": args.foreach, "blas": blas_libraries(), "openblas": openblas_core(),
    }), flush=True)


if __name__ == "__main__":
    main()
