#!/usr/bin/env python3
"""The seed tutorial self-attention-from-scratch.txt on folio's tensors: from its printed
embedded sentence and weight matrices, the second token's query, its scores against
every key, their softmax and its context vector, checked against the printed tables.

    PYTHONPATH=build/python python3 examples/python/self_attention_from_scratch.py

The tutorial's torch code with its names changed: torch.tensor -> folio.tensor,
F.softmax(x, dim=0) -> folio.softmax(x) (over the last dimension), vectors as 1-row
matrices (embedded_sentence[1:2] for the tutorial's embedded_sentence[1]). Its inputs are printed to 4 decimals, so the results agree to about 1e-3.
"""
import math
import sys

import numpy as np

import folio

embedded_sentence = folio.tensor([[0.3374, -0.1778], [0.1794, 1.8951], [0.3486, 0.6603], [0.4954, 0.2692],
                                  [0.6984, -1.4097], [0.7671, -1.1925], [0.3486, 0.6603], [-0.2196, -0.3792]])
W_query = folio.tensor([[0.2961, 0.5166], [0.2517, 0.6886], [0.0740, 0.8665]], requires_grad=True)
W_key = folio.tensor([[0.1366, 0.1025], [0.1841, 0.7264], [0.3153, 0.6871]], requires_grad=True)
W_value = folio.tensor([[0.0756, 0.1966], [0.3164, 0.4017], [0.1186, 0.8274], [0.3821, 0.6605]], requires_grad=True)
d_k = 3

PRINTED = {
    "query_2": [[1.0321, 1.3501, 1.6555]],
    "omega_2": [[-0.0879, 4.3783, 1.7863, 1.0502, -2.4988, -1.9530, 1.7863, -1.0434]],
    "attention_weights_2": [[0.0432, 0.5687, 0.1273, 0.0832, 0.0107, 0.0147, 0.1273, 0.0249]],
    "values": [[-0.0094, 0.0353, -0.1071, 0.0115], [0.3862, 0.8181, 1.5893, 1.3203],
               [0.1562, 0.3756, 0.5877, 0.5693], [0.0904, 0.2649, 0.2815, 0.3671],
               [-0.2244, -0.3454, -1.0836, -0.6643], [-0.1765, -0.2364, -0.8957, -0.4945],
               [0.1562, 0.3756, 0.5877, 0.5693], [-0.0912, -0.2218, -0.3398, -0.3344]],
    "context_vector_2": [[0.2593, 0.5718, 1.0390, 0.9041]],
}


def main():
    x_2 = embedded_sentence[1:2]                       # (1, 2): the second token
    query_2 = x_2 @ W_query.T                          # (1, d_q)
    keys = embedded_sentence @ W_key.T                 # (8, d_k)
    values = embedded_sentence @ W_value.T             # (8, d_v)
    omega_2 = query_2 @ keys.T                         # (1, 8)
    attention_weights_2 = folio.softmax(omega_2 * (1 / math.sqrt(d_k)))
    context_vector_2 = attention_weights_2 @ values    # (1, d_v)
    ok = True
    for name, t in [("query_2", query_2), ("omega_2", omega_2), ("attention_weights_2", attention_weights_2),
                    ("values", values), ("context_vector_2", context_vector_2)]:
        worst = float(np.abs(t.numpy() - np.array(PRINTED[name])).max())
        ok &= worst < 1e-3
        print(f"{name} {t.shape}:\n{np.array2string(t.numpy(), precision=4, floatmode='fixed')}")
        print(f"  largest difference from the tutorial's table: {worst:.1e}\n")
    # The tutorial's weights are Parameters: the context's gradient reaches them.
    context_vector_2.sum().backward()
    print("d sum(context_vector_2) / d W_value:\n", np.array2string(W_value.grad.numpy(), precision=4))
    print("every table matches the tutorial's" if ok else "a table differs from the tutorial's")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
