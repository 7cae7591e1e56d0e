#!/usr/bin/env python3
"""Draws one attention head of a trained folio model as a heatmap, into a PNG.

    PYTHONPATH=build/python python3 examples/python/attention_heatmap.py runs/x "To be, or not" \\
        --layer 0 --head 1 --out head.png

Rows are the queries (each token of the prompt), columns the keys it attends over;
a causal model leaves the upper triangle at zero. Needs matplotlib (python3-matplotlib).
"""
import argparse

import matplotlib

matplotlib.use("Agg")  # a file, no window
import matplotlib.pyplot as plt  # noqa: E402

import folio  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", help="a run directory or a .safetensors file")
    ap.add_argument("prompt")
    ap.add_argument("--layer", type=int, default=0)
    ap.add_argument("--head", type=int, default=0)
    ap.add_argument("--out", default="attention.png")
    args = ap.parse_args()
    model = folio.load(args.checkpoint)
    weights = model.attention(args.prompt)  # (L, H, T, T)
    L, H, T, _ = weights.shape
    if not (0 <= args.layer < L and 0 <= args.head < H):
        ap.error(f"--layer must be in [0, {L}) and --head in [0, {H}), got {args.layer} and {args.head}")
    ids = model.tokenizer.encode(args.prompt)[-T:]
    labels = [repr(model.tokenizer.decode([i]))[1:-1] for i in ids]
    fig, ax = plt.subplots(figsize=(1 + 0.4 * T, 1 + 0.4 * T))
    ax.imshow(weights[args.layer, args.head], cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(T), labels, rotation=90)
    ax.set_yticks(range(T), labels)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(f"layer {args.layer}, head {args.head}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}: layer {args.layer}, head {args.head}, {T} tokens")


if __name__ == "__main__":
    main()
