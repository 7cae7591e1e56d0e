#!/usr/bin/python3
"""Trains torch_gpt.py's PyTorch twin of folio's GPT on a character corpus the way
`folio train` does, so that the two can be run side by side on the same time budget.

Run with Debian's python3-torch (1.13):
  /usr/bin/python3 bench/peer/torch_train.py --threads 2 --max-time 600 --out torch.csv

What it shares with `folio train` (data/dataset.cpp, train/trainer.cpp, train/adamw.cpp):
- the corpus (default: data/tinyshakespeare.txt), its vocabulary (the sorted set of its
  code points, over the whole text) and its split (the first floor(n * (1 - val_fraction))
  tokens train, the rest validate);
- the batches: folio's own generator (xoshiro256** seeded through splitmix64, below(n)
  unbiased by rejection) draws the windows, so the same --seed gives the same training
  batches in the same order, and the evaluations use the same batches as folio's
  (a generator seeded with seed ^ 0xe7a1, restarted at every evaluation);
- the step: mean cross-entropy, backward, clip of the global gradient norm, AdamW
  (betas (0.9, beta2), eps 1e-8, weight decay on >= 2-D parameters only), learning
  rate lr * (step + 1) / (warmup + 1) during the warm-up, then cosine to min_lr;
- evaluation before steps 0, eval_interval, 2 eval_interval, ... and after the last:
  the mean loss of eval_iters batches of each split, in eval mode;
- --max-time: a budget of training seconds (the steps' time, evaluations excluded); the
  run stops after the step that reaches it. With --max-iters 0 (the default when
  --max-time is given) the cosine follows the clock: its progress is training seconds
  before the step / max_time (the warm-up still counts steps);
- the log: --out FILE gets folio's log.csv columns (step, train_loss, val_loss, lr,
  tokens_per_sec over the last log_interval steps, elapsed_s, val_bpc, train_s), so
  `folio plot RUN_DIR FILE` overlays the two curves.
What differs: the initial weights and the dropout masks come from torch's generator;
--bf16 runs forward and loss under torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's
CPU mixed precision: the matrix products have bf16 outputs, and so the attention's mask,
softmax and dropout run in bf16 too (the residual stream, the LayerNorms and the loss stay
fp32); folio's --dtype bf16 has fp32 outputs and keeps all but the products in fp32.

At the end, besides the last estimate, it computes the loss on the WHOLE val split as
`folio eval` does (every non-overlapping window of block_size characters, in fp32), and
prints one JSON line with it, bits per character, the best estimated val loss, steps,
seconds, tokens/s, threads, torch's version and, with --target, when the estimated val
loss first reached the target.
"""
import argparse
import json
import math
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MASK64 = (1 << 64) - 1


def unusable(message):
    """Unusable input, as folio: a message naming what is wrong, exit status 2."""
    print(f"torch_train.py: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a = p.add_argument
    a("--data", default=os.path.join(REPO, "data", "tinyshakespeare.txt"), help="training text (UTF-8)")
    a("--val-fraction", type=float, default=0.1, help="last fraction of the text held out")
    a("--out", default="", help="CSV of the evaluations (folio's log.csv columns); none if empty")
    a("--n-layer", type=int, default=4)
    a("--n-head", type=int, default=4)
    a("--n-embd", type=int, default=128)
    a("--block-size", type=int, default=64)
    a("--dropout", type=float, default=0.0)
    a("--activation", choices=["relu", "gelu"], default="relu")
    a("--batch-size", type=int, default=12)
    a("--max-iters", type=int, default=None,
      help="training steps; 0: no step limit (default 2000, or 0 when --max-time is given)")
    a("--max-time", type=float, default=0.0, help="budget of training seconds (0: none)")
    a("--lr", type=float, default=1e-3)
    a("--min-lr", type=float, default=1e-4)
    a("--warmup-iters", type=int, default=100)
    a("--lr-decay-iters", type=int, default=0, help="step where the cosine reaches --min-lr (0: --max-iters)")
    a("--weight-decay", type=float, default=0.1)
    a("--beta2", type=float, default=0.99)
    a("--grad-clip", type=float, default=1.0, help="clip the global gradient norm (0: off)")
    a("--eval-interval", type=int, default=250)
    a("--eval-iters", type=int, default=50)
    a("--log-interval", type=int, default=50)
    a("--seed", type=int, default=1337)
    a("--threads", type=int, default=1, help="torch.set_num_threads and OMP_NUM_THREADS")
    a("--bf16", action="store_true", help='forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)')
    a("--target", type=float, default=None, help="report when the estimated val loss first reaches this")
    a("--eval-batch-size", type=int, default=32, help="windows per forward pass of the full val loss")
    a("--check", action="store_true", help="check FolioRng against numbers from folio's Rng and exit")
    args = p.parse_args(argv)
    if args.max_iters is None:
        args.max_iters = 0 if args.max_time > 0 else 2000
    for name in ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "eval_interval", "eval_iters",
                 "log_interval", "threads", "eval_batch_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("max_iters", "warmup_iters", "lr_decay_iters"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if not args.max_time >= 0:
        p.error(f"--max-time must be >= 0 seconds (0: none), got {args.max_time}")
    if args.max_iters == 0 and args.max_time == 0:
        p.error("--max-iters 0 (no step limit) needs a time budget: --max-time > 0")
    if args.n_embd % args.n_head:
        p.error(f"--n-embd {args.n_embd} is not divisible by --n-head {args.n_head}")
    if not 0.0 <= args.dropout < 1.0:
        p.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if not 0.0 < args.val_fraction < 1.0:
        p.error(f"--val-fraction must be in (0, 1), got {args.val_fraction}")
    if not (args.lr > 0 and math.isfinite(args.lr)):
        p.error(f"--lr must be positive, got {args.lr}")
    if not 0.0 <= args.min_lr <= args.lr:
        p.error(f"--min-lr {args.min_lr} outside [0, --lr = {args.lr}]")
    if not 0.0 < args.beta2 < 1.0:
        p.error(f"--beta2 must be in (0, 1), got {args.beta2}")
    if not (args.weight_decay >= 0 and math.isfinite(args.weight_decay)):
        p.error(f"--weight-decay must be >= 0, got {args.weight_decay}")
    if not (args.grad_clip >= 0 and math.isfinite(args.grad_clip)):
        p.error(f"--grad-clip must be >= 0 (0: off), got {args.grad_clip}")
    if not 0 <= args.seed <= MASK64:
        p.error(f"--seed must be in [0, 2^64), got {args.seed}")
    return args


# The options come first, so that the thread count is in the environment before torch
# (and so libgomp and OpenBLAS, whose thread pools read it) loads.
if __name__ == "__main__":
    ARGS = parse_args()
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(ARGS.threads)

import resource  # noqa: E402
import signal  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT, blas_libraries, openblas_core  # noqa: E402  (the twin of folio's nn::GPT)


class FolioRng:
    """folio's Rng (autograd/rng.cpp): xoshiro256** seeded through splitmix64."""

    def __init__(self, seed):
        x, self.s = seed & MASK64, []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & MASK64
            z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def _rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & MASK64

    def next_u64(self):
        s = self.s
        result = (self._rotl((s[1] * 5) & MASK64, 7) * 9) & MASK64
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self._rotl(s[3], 45)
        return result

    def below(self, n):
        """Uniform in [0, n), rejecting the biased tail as folio does."""
        if n <= 1:
            return 0
        limit = MASK64 - MASK64 % n
        while True:
            x = self.next_u64()
            if x < limit:
                return x % n


def check_rng():
    """FolioRng against folio's Rng (autograd/rng.cpp, compiled): Rng(1337)'s first three
    next_u64(), then five below(1003790) (the bundled train split less 64), then
    Rng(1337 ^ 0xe7a1)'s three below(7)."""
    r, e = FolioRng(1337), FolioRng(1337 ^ 0xE7A1)
    got = ([r.next_u64() for _ in range(3)] + [r.below(1003790) for _ in range(5)] + [e.below(7) for _ in range(3)])
    want = [12468955128717782748, 15024386940265324015, 14342583032507416131,
            176888, 312419, 875217, 991937, 23213, 2, 4, 6]
    print("FolioRng matches folio's Rng" if got == want else f"FolioRng differs from folio's Rng: {got} != {want}")
    return got == want


def load_corpus(path, val_fraction):
    """(vocabulary chars, train tokens, val tokens) as folio's Corpus::load builds them."""
    try:
        raw = open(path, "rb").read()
    except OSError as e:
        unusable(f"--data {path}: cannot open ({e.strerror})")
    if not raw:
        unusable(f"--data {path}: file is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        unusable(f"--data {path}: invalid UTF-8 at byte offset {e.start} ({e.reason})")
    chars = sorted(set(text))  # code points, as Vocab::from_text
    ids = {c: i for i, c in enumerate(chars)}
    tokens = torch.tensor([ids[c] for c in text], dtype=torch.long)
    n_train = math.floor(len(tokens) * (1.0 - val_fraction))  # split_tokens, in double as folio
    return chars, tokens[:n_train], tokens[n_train:]


def sample_batch(tokens, B, T, rng):
    """folio's sample_batch: row b starts at rng.below(n - T), drawn in order b = 0..B-1."""
    starts = torch.tensor([rng.below(len(tokens) - T) for _ in range(B)], dtype=torch.long)
    idx = starts[:, None] + torch.arange(T + 1)  # (B, T + 1)
    window = tokens[idx]
    return window[:, :T].contiguous(), window[:, 1:].contiguous()


def learning_rate(args, step, seconds):
    """folio's Schedule::at; the cosine follows seconds / max_time when the run is timed."""
    if step < args.warmup_iters:
        return args.lr * (step + 1) / (args.warmup_iters + 1)
    if args.max_iters == 0 and args.lr_decay_iters == 0:
        if seconds >= args.max_time:
            return args.min_lr
        ratio = max(0.0, seconds / args.max_time)
    else:
        decay = args.lr_decay_iters or args.max_iters
        if step >= decay:
            return args.min_lr
        ratio = (step - args.warmup_iters) / max(1, decay - args.warmup_iters)
    return args.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (args.lr - args.min_lr)


def precision(args):
    """A context for forward + loss: bf16 autocast, or nothing."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16)



@torch.no_grad()
def estimate(model, args, train, val):
    """folio's Trainer::evaluate: eval_iters batches of each split, train first, from one
    generator seeded with seed ^ 0xe7a1 (so the same batches at every evaluation)."""
    model.eval()
    rng = FolioRng(args.seed ^ 0xE7A1)
    means = []
    for tokens in (train, val):
        total = 0.0
        for _ in range(args.eval_iters):
            x, y = sample_batch(tokens, args.batch_size, args.block_size, rng)
            with precision(args):
                total += float(model(x, y))
        means.append(total / args.eval_iters)
    model.train()
    return means


@torch.no_grad()
def full_loss(model, tokens, T, batch):
    """`folio eval`'s loss: the mean over every non-overlapping window of T tokens, in fp32."""
    model.eval()
    windows = (len(tokens) - 1) // T
    total = 0.0
    for w in range(0, windows, batch):
        B = min(batch, windows - w)
        x = tokens[w * T:(w + B) * T].view(B, T)
        y = tokens[w * T + 1:(w + B) * T + 1].view(B, T)
        total += float(model(x, y)) * B
    return total / windows, windows


def main(args):
    if args.check:
        sys.exit(0 if check_rng() else 1)
    torch.set_num_threads(args.threads)
    chars, train, val = load_corpus(args.data, args.val_fraction)
    T, B = args.block_size, args.batch_size
    for name, tokens in (("train", train), ("val", val)):
        if len(tokens) < T + 1:
            unusable(f"--data {args.data}: the {name} split has {len(tokens)} characters, "
                     f"needs at least block_size + 1 = {T + 1}")
    torch.manual_seed(args.seed)  # initial weights and dropout masks: torch's, not folio's
    model = GPT(args.n_layer, args.n_head, args.n_embd, T, args.dropout, args.activation, vocab=len(chars))
    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": args.weight_decay},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, args.beta2), eps=1e-8)
    try:
        log = open(args.out, "w") if args.out else None
    except OSError as e:
        unusable(f"--out {args.out}: cannot open for writing ({e.strerror})")
    if log:
        log.write("step,train_loss,val_loss,lr,tokens_per_sec,elapsed_s,val_bpc,train_s\n")
    n_params = sum(p.numel() for p in params)
    blas = blas_libraries()
    if not any("openblas" in lib or "mkl" in lib for lib in blas):
        # Debian's torch takes whatever libblas.so.3 is selected, netlib's reference BLAS
        # unless OpenBLAS is installed: many times slower, and no fair comparison.
        print("torch_train.py: warning: torch's matrix products run on " +
              (", ".join(lib for lib in blas if "blas" in lib) or "an unknown BLAS") +
              ", not OpenBLAS; install libopenblas0-openmp and run with LD_LIBRARY_PATH="
              "/usr/lib/x86_64-linux-gnu/openblas-openmp (bench/README.md)", file=sys.stderr, flush=True)
    print(f"model: {n_params} parameters, vocab {len(chars)}, training on {args.data} ({len(train)} train / "
          f"{len(val)} val characters), torch {torch.__version__}, {torch.get_num_threads()} threads"
          f"{', bf16 autocast' if args.bf16 else ''}", flush=True)

    # Ctrl-C or SIGTERM ends the step, then the run evaluates and reports (as folio saves
    # and stops); the handlers before come back after the loop, so a second one kills.
    stop = []
    previous = {sig: signal.signal(sig, lambda *_: stop.append(True)) for sig in (signal.SIGINT, signal.SIGTERM)}
    data_rng = FolioRng(args.seed)
    step, train_s, tok_s, best = 0, 0.0, 0.0, math.inf
    reached, last = None, None
    start = window_start = time.perf_counter()
    window_steps = 0

    def evaluate():
        nonlocal best, reached, last
        tr, va = estimate(model, args, train, val)
        elapsed, lr = time.perf_counter() - start, learning_rate(args, step, train_s)
        if log:
            log.write(f"{step},{tr:.6g},{va:.6g},{lr:.6g},{tok_s:.6g},{elapsed:.6g},{va / math.log(2):.6g},"
                      f"{train_s:.6g}\n")
            log.flush()
        print(f"step {step}: train loss {tr:.4f}, val loss {va:.4f} ({va / math.log(2):.3f} bits/char), "
              f"{elapsed:.1f} s elapsed, {train_s:.1f} s training", flush=True)
        if not (math.isfinite(tr) and math.isfinite(va)):
            sys.exit(f"torch_train.py: the evaluation loss became {va if math.isfinite(tr) else tr} at step {step} "
                     "(training diverged)")
        best, last = min(best, va), (tr, va)
        if args.target is not None and reached is None and va <= args.target:
            reached = {"step": step, "elapsed_s": elapsed, "train_s": train_s, "val_loss": va}

    def more():
        return ((args.max_iters == 0 or step < args.max_iters) and (args.max_time == 0 or train_s < args.max_time)
                and not stop)

    model.train()
    while more():
        if step % args.eval_interval == 0:
            evaluate()
        t0 = time.perf_counter()
        lr = learning_rate(args, step, train_s)
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = sample_batch(train, B, T, data_rng)
        with precision(args):
            loss = model(x, y)
        loss_value = float(loss)
        if not math.isfinite(loss_value):
            sys.exit(f"torch_train.py: the loss became {loss_value} at step {step} (training diverged)")
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        now = time.perf_counter()
        train_s += now - t0
        # folio's Progress: tokens/s over the steps since the last progress line.
        window_steps += 1
        tok_s = window_steps * B * T / (now - window_start)
        if (step + 1) % args.log_interval == 0:
            window_start, window_steps = now, 0
            of = f"/{args.max_iters}" if args.max_iters else ""
            print(f"step {step + 1}{of}: loss {loss_value:.4f}, lr {lr:.2e}, {tok_s:.0f} tok/s, "
                  f"{now - start:.1f} s elapsed, {train_s:.1f} s training", flush=True)
        step += 1
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    evaluate()
    if stop:
        print(f"interrupted at step {step}", flush=True)
    wall_s = time.perf_counter() - start
    val_loss, windows = full_loss(model, val, T, args.eval_batch_size)
    print(f"full val: loss {val_loss:.6f}  bits/char {val_loss / math.log(2):.4f}  "
          f"({windows} windows of {T} characters)", flush=True)
    print(json.dumps({
        "impl": "torch", "final_val_loss": val_loss, "final_val_bpc": val_loss / math.log(2),
        "best_est_val_loss": best, "last_est_train_loss": last[0], "last_est_val_loss": last[1],
        "steps": step, "wall_s": wall_s, "train_s": train_s,
        "tokens_per_sec": step * B * T / train_s if train_s > 0 else None,
        "threads": args.threads, "torch_threads": torch.get_num_threads(), "torch_version": torch.__version__,
        "bf16": args.bf16, "target": args.target, "target_reached": reached,
        "n_layer": args.n_layer, "n_head": args.n_head, "n_embd": args.n_embd, "block_size": T, "batch_size": B,
        "dropout": args.dropout, "activation": args.activation, "params": n_params, "vocab": len(chars),
        "max_iters": args.max_iters, "max_time": args.max_time, "lr": args.lr, "min_lr": args.min_lr,
        "warmup_iters": args.warmup_iters, "seed": args.seed, "interrupted": bool(stop),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "blas": blas, "openblas": openblas_core(),
    }), flush=True)


if __name__ == "__main__":
    main(ARGS)
