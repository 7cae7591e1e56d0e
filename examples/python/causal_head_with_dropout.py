#!/usr/bin/env python3
"""The seed tutorial causal-head-with-dropout.txt on folio's tensors: the averaging
trick (a lower-triangular matrix of weights that sum to one, times b), and the first
batch's masked scores turned into attention weights, checked against its printed tables.

    PYTHONPATH=build/python python3 examples/python/causal_head_with_dropout.py

The tutorial's lines with torch -> folio: tril = folio.tril(folio.ones(T, T)),
wei.masked_fill(tril == 0, float('-inf')) then folio.softmax(wei) (folio.causal_softmax
is the same numbers in one op). Its dropout then draws from a seed:
folio.dropout(wei, 0.2, seed=1337).
"""
import sys

import numpy as np

import folio

b = folio.tensor([[2.0, 7.0], [6.0, 4.0], [6.0, 5.0]])  # the tutorial's torch.randint draw, as printed
PRINTED_C = [[2.0000, 7.0000], [4.0000, 5.5000], [4.6667, 5.3333]]
# weight[0] after masked_fill: the lower triangle as printed (what is above it is masked).
SCORES = [[0.0518], [-0.0279, -0.2687], [0.1603, -0.3077, 0.5522], [0.2428, -0.4568, 0.8337, 1.2711],
          [0.0102, 0.3929, -0.0695, -0.1160, -0.4921], [-0.3134, 0.4386, -1.0379, -1.5788, -0.3969, 2.1592],
          [0.0783, -0.2394, 0.2922, 0.4477, 0.2602, -0.6664, 0.0904],
          [-0.3488, 1.2351, -1.3450, -2.0646, -1.3681, 3.1349, -0.3791, 1.1684]]
PRINTED_WEIGHTS = [[1.0000], [0.5599, 0.4401], [0.3220, 0.2016, 0.4764], [0.1640, 0.0815, 0.2961, 0.4585],
                   [0.2051, 0.3007, 0.1894, 0.1808, 0.1241], [0.0600, 0.1273, 0.0291, 0.0169, 0.0552, 0.7114],
                   [0.1408, 0.1025, 0.1744, 0.2038, 0.1690, 0.0669, 0.1426],
                   [0.0223, 0.1086, 0.0082, 0.0040, 0.0080, 0.7257, 0.0216, 0.1016]]


def square(rows):
    out = np.zeros((len(rows), len(rows)))
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def show(name, t, printed, tolerance=0.5e-4 + 1e-6):  # the printed precision
    worst = float(np.abs(t.numpy() - printed).max())
    print(f"{name} {t.shape}:\n{np.array2string(t.numpy(), precision=4, floatmode='fixed')}")
    print(f"  largest difference from the tutorial's table: {worst:.1e}\n")
    return worst < tolerance


def main():
    a = folio.tril(folio.ones(3, 3))
    a = a / folio.sum(a, 1, keepdim=True)
    ok = show("c = a @ b", a @ b, np.array(PRINTED_C))
    T = len(SCORES)
    tril = folio.tril(folio.ones(T, T))
    wei = folio.tensor(square(SCORES))  # what lies above the diagonal is masked: zeros stand in
    wei = wei.masked_fill(tril == 0, float('-inf'))
    wei = folio.softmax(wei)
    # From scores printed to 4 decimals: their rounding moves a weight by up to 5e-5 too.
    ok &= show("wei[0]", wei, square(PRINTED_WEIGHTS), tolerance=1e-4)
    dropped = folio.dropout(wei, 0.2, seed=1337)
    print(f"dropout(wei, 0.2), seed 1337: {int((dropped.numpy() == 0).sum() - 28)} of 36 weights dropped, "
          f"the rest scaled by {1 / 0.8:.2f}")
    print("every table matches the tutorial's" if ok else "a table differs from the tutorial's")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
