"""folio's autograd from Python: each op's forward against numpy, its gradient from
.backward() against central differences of the same op (tests/python/gradcheck.py),
the numpy view, and the seed tutorials' printed tables (here and in examples/python/)."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import folio
from conftest import ROOT
from gradcheck import gradcheck

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
    t = folio.tensor(x, requires_grad=True)
    np.testing.assert_allclose(op(t).numpy(), reference(x), rtol=1e-4, atol=1e-5)
    assert gradcheck(lambda: op(t), [t]) == []


def test_dropout_gradient_with_a_fixed_mask():
    # The same seed draws the same mask on every call, as the C++ check does it.
    t = folio.tensor(rng.normal(size=(4, 8)), requires_grad=True)
    assert gradcheck(lambda: folio.dropout(t, 0.3, seed=42), [t]) == []
    kept = folio.dropout(t, 0.3, seed=42).numpy() != 0
    np.testing.assert_allclose(folio.dropout(t, 0.3, seed=42).numpy()[kept], t.numpy()[kept] / 0.7, rtol=1e-6)


def test_tensor_is_numpy_friendly():
    t = folio.tensor(np.arange(6).reshape(2, 3), requires_grad=True)
    assert t.shape == (2, 3) and t.numpy().dtype == np.float32
    assert np.shares_memory(t.numpy(), t.numpy())
    assert "shape=(2, 3)" in repr(t) and "requires_grad=True" in repr(t)
    np.testing.assert_array_equal(np.asarray(t.reshape([3, 2])), np.arange(6).reshape(3, 2))
    assert t.grad is None
    with pytest.raises(ValueError, match="shapes"):
        folio.tensor(np.ones((2, 3))) @ folio.tensor(np.ones((2, 3)))
    with pytest.raises(TypeError, match="needs numbers"):
        folio.tensor(np.array(["a"]))
    with pytest.raises(ValueError, match="at most 4 dimensions"):
        folio.tensor(np.zeros((1, 1, 1, 1, 1)))


def test_numpy_on_the_left_stays_in_the_graph():
    # numpy's scalars and arrays hand the operator over, as they do to torch's tensors:
    # np.float32(1) - x is a folio.Tensor the gradient flows through, not a detached array.
    x = folio.tensor([1.0, 2.0], requires_grad=True)
    for value in (np.float32(3), np.float64(3), np.array([3.0, 3.0], dtype=np.float32)):
        y = value - x
        assert isinstance(y, folio.Tensor), type(y)
        np.testing.assert_array_equal(y.numpy(), [2.0, 1.0])
    ((np.float32(2) * x) / np.float32(4) + np.ones(2)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.5, 0.5])
    np.testing.assert_array_equal(np.asarray(x), [1.0, 2.0])  # still an array where one is asked for


# "Your journey starts with one step" embedded in 3 dimensions, and what the seed
# tutorials print for it (4 decimals): tests/test_seeds.cpp's vectors.
INPUTS = [[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64], [0.22, 0.58, 0.33], [0.77, 0.25, 0.10],
          [0.05, 0.80, 0.55]]
PRINTED_SCORES = [[0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310], [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
                  [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605], [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],
                  [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935], [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450]]
PRINTED_WEIGHTS = [[0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452], [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
                   [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565], [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],
                   [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295], [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896]]
PRINTED_CONTEXT = [[0.4421, 0.5931, 0.5790], [0.4419, 0.6515, 0.5683], [0.4431, 0.6496, 0.5671],
                   [0.4304, 0.6298, 0.5510], [0.4671, 0.5910, 0.5266], [0.4177, 0.6503, 0.5645]]


def test_simplified_self_attention_matches_the_printed_tables():
    inputs = folio.tensor(INPUTS)
    scores = inputs @ inputs.T
    weights = folio.softmax(scores)
    for t, printed in [(scores, PRINTED_SCORES), (weights, PRINTED_WEIGHTS), (weights @ inputs, PRINTED_CONTEXT)]:
        np.testing.assert_allclose(t.numpy(), printed, rtol=0, atol=0.5e-4 + 1e-6)  # the printed precision


@pytest.mark.parametrize("example", ["self_attention_from_scratch.py", "causal_head_with_dropout.py"])
def test_tutorial_tables(example):
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / example)], stdout=subprocess.PIPE,
                         text=True, env=os.environ)
    assert out.returncode == 0 and "every table matches the tutorial's" in out.stdout, out.stdout


def test_matmul_takes_arrays_on_either_side():
    # docs/python.md: the operators take numpy's arrays on either side, @ as the others.
    w = folio.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    left, right = np.array([[1.0, 0.0]]), np.array([[0.0], [1.0]], dtype=np.float64)
    y = left @ w
    assert isinstance(y, folio.Tensor), type(y)
    np.testing.assert_array_equal(y.numpy(), [[1.0, 2.0]])
    np.testing.assert_array_equal((w @ right).numpy(), [[2.0], [4.0]])
    (left @ w @ right).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[0.0, 1.0], [0.0, 0.0]])
    with pytest.raises(TypeError, match=r"^\[matmul\] .*got float"):
        w @ 2.0


def test_an_axis_that_is_no_integer_is_named():
    x = folio.tensor(np.ones((2, 3)))
    for reduce in (x.sum, x.mean, lambda axis: folio.sum(x, axis)):
        assert reduce(np.int64(1)).shape == (2,)
        for axis in ("1", 1.0, True):
            with pytest.raises(TypeError, match=r"axis must be an int or None, got "):
                reduce(axis)


def test_a_shape_of_more_elements_than_memory_addresses_is_refused():
    # Their count wrapped to zero: a tensor of no memory that claimed 2**64 values, whose
    # sum was 0 and whose first index read past its end.
    for dims in ((2**32, 2**32), (2**62, 4), (2**70,)):
        for make in (folio.ones, folio.zeros):
            with pytest.raises(ValueError, match=r"^\[(ones|zeros)\] .* more than"):
                make(*dims)
    assert folio.zeros(3, 0).shape == (3, 0)
    # (2**62 + 1) * 4 wraps to 4: a view of 4 values whose x[1] read past them.
    with pytest.raises(ValueError, match=r"^\[reshape\] shape \(4611686018427387905, 4\) has more than"):
        folio.zeros(4).reshape([2**62 + 1, 4])
    assert folio.zeros(4).reshape([-1, 2]).shape == (2, 2)


def test_causal_softmax_over_no_keys_is_refused():
    with pytest.raises(ValueError, match=r"^\[causal_softmax\] needs a non-empty last dim, got shape \(1, 0, 0\)"):
        folio.causal_softmax(folio.zeros(1, 0, 0))
    with pytest.raises(ValueError, match="causal_softmax"):
        folio.nn.Head(n_embd=8, head_size=4, block_size=4)(folio.zeros(1, 0, 8))


def test_the_truth_of_a_tensor_is_its_one_value():
    assert not folio.tensor(0.0) and folio.tensor([[2.0]]) and not folio.tensor([0.0])
    for shape in ((2,), (0,), (2, 2)):
        with pytest.raises(ValueError, match=r"^\[bool\] the truth of a tensor of shape .* is ambiguous"):
            bool(folio.zeros(*shape))
