"""The C++ gradient check (autograd/gradcheck.h) from Python: .backward() of the scalar
sum(f(inputs) * R), with R a fixed random tensor, against central differences of the
same scalar. f runs on folio's float32 tensors; the weighted sums and the differences
are taken in float64 numpy, so the numeric side adds no rounding of its own.

Its eps and tolerances are the C++ defaults: float32 forwards need a step near 1e-3
(smaller ones drown the difference in rounding), and an element passes when
|analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|)."""
import numpy as np

import folio

EPS, RTOL, ATOL = 1e-3, 1e-2, 2e-3


def gradcheck(f, inputs, seed=1234):
    """Checks every input (a folio.Tensor that requires grad: data or a module's
    parameter) by nudging its elements in place through a writable view. f() takes no
    arguments and reads the inputs it closes over. Returns a list of failures, one line
    per failing input naming its worst element; empty when every element passes."""
    for x in inputs:
        x.zero_grad()
    out = f()
    R = np.random.default_rng(seed).normal(size=out.shape)
    (out * folio.tensor(R)).sum().backward()

    def weighted_sum():
        return float((f().numpy().astype(np.float64) * R).sum())

    failures = []
    for k, x in enumerate(inputs):
        analytic = np.zeros(x.shape) if x.grad is None else x.grad.numpy().astype(np.float64)
        values = x.numpy(writable=True)  # float32, the tensor's own memory
        numeric = np.zeros(x.shape)
        for i in np.ndindex(*x.shape):
            saved = values[i]
            above, below = np.float32(saved + np.float32(EPS)), np.float32(saved - np.float32(EPS))
            values[i] = above
            up = weighted_sum()
            values[i] = below
            down = weighted_sum()
            values[i] = saved
            # Over the step actually taken: float32 rounds saved +- eps.
            numeric[i] = (up - down) / (float(above) - float(below))
        error = np.abs(analytic - numeric)
        tolerance = ATOL + RTOL * np.maximum(np.abs(analytic), np.abs(numeric))
        if x.grad is None or not np.all(error <= tolerance):
            worst = np.unravel_index(np.argmax(np.nan_to_num(error / tolerance, nan=np.inf)), error.shape)
            failures.append(f"input {k} {x.shape}{' received no gradient' if x.grad is None else ''}: element "
                            f"{tuple(map(int, worst))} analytic {analytic[worst]:.6g} vs numeric {numeric[worst]:.6g}")
    return failures
