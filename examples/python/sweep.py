#!/usr/bin/env python3
"""Trains three tiny models from a loop, one per width, and prints their val losses.

    PYTHONPATH=build/python python3 examples/python/sweep.py --data data/tinyshakespeare.txt \\
        --out runs/sweep --max-iters 200

Each run is a folio train run (runs/sweep/n_embd-16, ...): the same options as the
command, by name. on_eval hears each evaluation as it is logged.
"""
import argparse
import os

import folio


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="a text file (or a token directory)")
    ap.add_argument("--out", default="runs/sweep", help="a directory for the runs")
    ap.add_argument("--max-iters", type=int, default=200)
    args = ap.parse_args()
    results = {}
    for width in (8, 16, 32):
        out = os.path.join(args.out, f"n_embd-{width}")
        evals = []
        run = folio.train(out, args.data, n_layer=2, n_head=2, n_embd=width, block_size=32, batch_size=8,
                          max_iters=args.max_iters, eval_interval=max(1, args.max_iters // 4), eval_iters=4,
                          overwrite=True, quiet=True, on_eval=evals.append)
        results[width] = (evals[-1]["val_loss"], min(row["val_loss"] for row in run.log))
    print(f"{'n_embd':>6}  {'last val':>8}  {'best val':>8}")
    for width, (last, best) in results.items():
        print(f"{width:>6}  {last:>8.4f}  {best:>8.4f}")


if __name__ == "__main__":
    main()
