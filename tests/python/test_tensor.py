"""folio's autograd from Python: each op's forward against numpy, its gradient from
.backward() against central differences of the same op, the numpy view, and the
tutorials' tables (examples/python/)."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import folio
from conftest import ROOT

rng = np.random.default_rng(7)


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def layer_norm(x, w, b):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b


def causal(s):
    return softmax(np.where(np.tril(np.ones(s.shape[-2:])) == 1, s, -np.inf))


W, B = rng.normal(size=4), rng.normal(size=4)
M = rng.normal(size=(4, 5))
TARGETS = [1, 0, 3]
# name: (folio op on x, numpy op on x, x's sampler)
OPS = {
    "add (broadcast)": (lambda x: x + folio.tensor(W), lambda x: x + W, None),
    "rsub": (lambda x: 2.0 - x, lambda x: 2.0 - x, None),
    "mul": (lambda x: x * x, lambda x: x * x, None),
    "div": (lambda x: 1.0 / x, lambda x: 1.0 / x, lambda s: rng.uniform(1, 2, s) * rng.choice([-1, 1], s)),
    "matmul": (lambda x: x @ folio.tensor(M), lambda x: x @ M, None),
    "transpose": (lambda x: x.T @ x, lambda x: x.T @ x, None),
    "softmax": (folio.softmax, softmax, None),
    "log_softmax": (folio.log_softmax, lambda x: np.log(softmax(x)), None),
    "causal_softmax": (lambda x: folio.causal_softmax(x.T @ x, 0.5),
                       lambda x: causal(0.5 * (x.T @ x)), None),
    "relu": (folio.relu, lambda x: np.maximum(x, 0), lambda s: rng.uniform(0.1, 1, s) * rng.choice([-1, 1], s)),
    "gelu": (folio.gelu, lambda x: x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))), None),
    "tanh": (folio.tanh, np.tanh, None),
    "exp": (folio.exp, np.exp, None),
    "log": (folio.log, np.log, lambda s: rng.uniform(0.5, 2, s)),
    "layer_norm": (lambda x: folio.layer_norm(x, folio.tensor(W), folio.tensor(B)), lambda x: layer_norm(x, W, B), None),
    "mean(axis)": (lambda x: x.mean(axis=1, keepdim=True) * x, lambda x: x.mean(1, keepdims=True) * x, None),
    "cross_entropy": (lambda x: folio.cross_entropy(x, TARGETS),
                      lambda x: -np.log(softmax(x))[np.arange(3), TARGETS].mean(), None),
}


@pytest.mark.parametrize("name", OPS)
def test_op_forward_and_gradient(name):
    op, reference, sample = OPS[name]
    x = (sample or (lambda s: rng.normal(size=s)))((3, 4))
    out = op(folio.tensor(x))
    np.testing.assert_allclose(out.numpy(), reference(x), rtol=1e-4, atol=1e-5)
    R = rng.normal(size=out.shape)

    def f(values, grad=False):
        t = folio.tensor(values, requires_grad=grad)
        y = (op(t) * folio.tensor(R)).sum()
        return t, y

    t, y = f(x, grad=True)
    y.backward()
    eps = 1e-2
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        numeric[i] = (f(up)[1].item() - f(down)[1].item()) / (2 * eps)
    np.testing.assert_allclose(t.grad.numpy(), numeric, rtol=1e-2, atol=2e-3)


def test_tensor_is_numpy_friendly():
    t = folio.tensor(np.arange(6).reshape(2, 3), requires_grad=True)
    assert t.shape == (2, 3) and t.numpy().dtype == np.float32
    assert np.shares_memory(t.numpy(), t.numpy())
    assert "shape=(2, 3)" in repr(t) and "requires_grad=True" in repr(t)
    np.testing.assert_array_equal(np.asarray(t.reshape([3, 2])), np.arange(6).reshape(3, 2))
    assert t.grad is None
    with pytest.raises(ValueError, match="shapes"):
        folio.tensor(np.ones((2, 3))) @ folio.tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match="needs numbers"):
        folio.tensor(np.array(["a"]))
    with pytest.raises(ValueError, match="at most 4 dimensions"):
        folio.tensor(np.zeros((1, 1, 1, 1, 1)))


@pytest.mark.parametrize("example", ["self_attention_from_scratch.py", "causal_head_with_dropout.py"])
def test_tutorial_tables(example):
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / example)], stdout=subprocess.PIPE,
                         text=True, env=os.environ)
    assert out.returncode == 0 and "every table matches the tutorial's" in out.stdout, out.stdout
