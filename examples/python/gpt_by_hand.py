#!/usr/bin/env python3
"""A folio.nn.GPT trained by a loop written in Python, as nanoGPT's train.py writes it:
batches drawn with numpy, `logits, loss = model(x, y)`, `loss.backward()`, and Adam's
update on each parameter in place (`p -= update` under folio.no_grad()). folio computes
the forward and backward passes.

    PYTHONPATH=build/python python3 examples/python/gpt_by_hand.py --data data/tinyshakespeare.txt

(folio.train does all of this, faster and with checkpoints: this is for reading and for
trying an idea in Python.)
"""
import argparse

import numpy as np

import folio


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="a text file")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--chars", type=int, default=100_000, help="how much of the text to train on")
    args = ap.parse_args()
    text = open(args.data, encoding="utf-8").read()[:args.chars]
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text], dtype=np.int32)  # the tutorials' character vocabulary
    B, T, lr = 8, 32, 3e-3
    model = folio.nn.GPT(vocab_size=len(chars), block_size=T, n_layer=2, n_head=2, n_embd=32, seed=1337)
    params = model.named_parameters()
    m = {name: np.zeros(p.shape, np.float32) for name, p in params.items()}  # Adam's moments
    v = {name: np.zeros(p.shape, np.float32) for name, p in params.items()}
    rng = np.random.default_rng(1337)
    print(f"{model.num_parameters} parameters, vocabulary {len(chars)}")
    for step in range(1, args.steps + 1):
        starts = rng.integers(0, len(ids) - T - 1, B)
        x = np.stack([ids[s:s + T] for s in starts])            # (B, T)
        y = np.stack([ids[s + 1:s + T + 1] for s in starts])    # (B, T): each next token
        logits, loss = model(x, y)
        model.zero_grad()
        loss.backward()
        with folio.no_grad():                                    # an optimizer step, as torch's
            for name, p in params.items():
                g = p.grad.numpy()
                m[name] = 0.9 * m[name] + 0.1 * g
                v[name] = 0.999 * v[name] + 0.001 * g * g
                update = lr * (m[name] / (1 - 0.9 ** step)) / (np.sqrt(v[name] / (1 - 0.999 ** step)) + 1e-8)
                p -= update                                      # the model's own weights, in place
        if step == 1 or step % 50 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
