#!/usr/bin/env python3
"""compare_weights.py A B [TOLERANCE]: the largest difference between the weights of
two folio checkpoints, relative to the largest weight; exits 1 above TOLERANCE
(default 0: bit-for-bit equal). Used by the MPI tests."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from folio_numpy import load  # noqa: E402

a, _, _ = load(sys.argv[1])
b, _, _ = load(sys.argv[2])
tolerance = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
assert a.keys() == b.keys(), "different parameter names"
scale = max(float(abs(w).max()) for w in a.values())
worst, where = 0.0, ""
for name in a:
    d = float(abs(a[name].astype("f8") - b[name].astype("f8")).max()) / scale
    if d > worst:
        worst, where = d, name
print(f"max relative difference {worst:.3g} ({where or 'all equal'})")
sys.exit(0 if worst <= tolerance else 1)
