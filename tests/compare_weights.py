#!/usr/bin/env python3
"""compare_weights.py A B [TOLERANCE]: how far the weights of two folio checkpoints are
apart. With no TOLERANCE (or 0) they must be equal bit for bit. With one, the measure is
the whole model's relative difference, ||A - B|| / ||A|| over all weights together, which
must not pass TOLERANCE. Used by the MPI tests, whose runs add a batch's gradient in
another order than one process does.

Why not the largest single difference: Adam moves each weight by about +-lr at its first
steps whatever its gradient's size, so a gradient that is rounding noise (a sum that
cancels) can flip the sign of one weight's step. On an AVX2 CPU one weight of a
two-rank run then differed by 4.5e-5 of the largest weight after one step, while the
model as a whole agreed to 3.4e-6; a rank that trains on another batch (4 sequences
for 5) is 1.7e-2 apart."""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from folio_numpy import load  # noqa: E402

a, _, _ = load(sys.argv[1])
b, _, _ = load(sys.argv[2])
tolerance = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
assert a.keys() == b.keys(), "different parameter names"
scale = max(float(abs(w).max()) for w in a.values())
worst, where, squared, norm = 0.0, "", 0.0, 0.0
for name in a:
    d = a[name].astype("f8") - b[name].astype("f8")
    squared += float((d * d).sum())
    norm += float((a[name].astype("f8") ** 2).sum())
    if float(abs(d).max()) / scale > worst:
        worst, where = float(abs(d).max()) / scale, name
relative = math.sqrt(squared / norm) if norm else math.sqrt(squared)
print(f"relative difference {relative:.3g} (||A - B|| / ||A||); largest {worst:.3g} of the largest weight "
      f"({where or 'all equal'})")
sys.exit(0 if (relative <= tolerance if tolerance > 0 else worst == 0) else 1)
