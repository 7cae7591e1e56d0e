"""The tutorials' masking and indexing on folio's tensors: tril, ones, == 0, masked_fill
and x[...] against numpy, their gradients against central differences
(tests/python/gradcheck.py), and the indices folio refuses."""
import numpy as np
import pytest

import folio
from gradcheck import gradcheck

rng = np.random.default_rng(11)
T = 5


def test_the_tutorials_causal_mask_lines_run_with_names_changed():
    tril = folio.tril(folio.ones(T, T))
    np.testing.assert_array_equal(tril.numpy(), np.tril(np.ones((T, T))))
    mask = tril == 0
    assert mask.dtype == np.bool_ and mask.shape == (T, T)
    scores = rng.normal(size=(2, T, T))  # (B, T, T), the (T, T) mask over every batch
    wei = folio.tensor(scores).masked_fill(tril == 0, float("-inf"))
    expected = np.where(np.tril(np.ones((T, T))) == 0, -np.inf, scores)
    np.testing.assert_array_equal(wei.numpy(), expected.astype(np.float32))
    # Bit for bit the one op that stands for the pair.
    np.testing.assert_array_equal(folio.softmax(wei).numpy(), folio.causal_softmax(folio.tensor(scores)).numpy())


def test_masked_fill_and_tril_gradients():
    x = folio.tensor(rng.normal(size=(2, T, T)), requires_grad=True)
    mask = np.triu(np.ones((T, T)), 1) == 1
    assert gradcheck(lambda: folio.masked_fill(x, mask, -3.0), [x]) == []
    assert gradcheck(lambda: folio.softmax(x.masked_fill(mask, float("-inf"))), [x]) == []
    assert gradcheck(lambda: folio.tril(x, diagonal=1), [x]) == []
    # Zero where filled: nothing of the output there depends on x.
    x.zero_grad()
    folio.masked_fill(x, mask, 7.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(~mask, (2, T, T)).astype(np.float32))


def test_tril_diagonal_ones_zeros_and_comparisons_as_numpy():
    x = rng.normal(size=(3, 4))
    for k in (-1, 0, 2):
        np.testing.assert_array_equal(folio.tril(folio.tensor(x), k).numpy(), np.tril(x, k).astype(np.float32))
    assert folio.zeros((2, 3)).shape == (2, 3) and folio.ones(4).numpy().sum() == 4
    assert folio.ones(2, requires_grad=True).requires_grad
    t = folio.tensor([[1.0, 0.0], [0.0, 2.0]])
    np.testing.assert_array_equal(t != 0, [[True, False], [False, True]])
    np.testing.assert_array_equal(t == folio.tensor([1.0, 2.0]), [[True, False], [False, True]])
    assert len({t, t}) == 1  # still hashable (by identity, as torch's)


# key: numpy's own result is the reference
INDICES = [(1,), (slice(None), slice(None, 3)), (slice(1, 3), slice(1, 3)), (1, slice(None, 3)), (-1, 2),
           (slice(None), 1, slice(2, None)), (slice(None, None, 1), -2), (slice(2, 1),), (slice(-3, 99),), (0, 1, 2),
           (np.int64(2), slice(np.int32(1), None))]


@pytest.mark.parametrize("key", INDICES, ids=str)
def test_indexing_matches_numpy_and_scatters_its_gradient(key):
    x = rng.normal(size=(3, 4, 5))
    t = folio.tensor(x, requires_grad=True)
    np.testing.assert_array_equal(t[key].numpy(), x.astype(np.float32)[key])
    if t[key].numpy().size:
        assert gradcheck(lambda: t[key] * 1.5, [t]) == []


def test_the_tutorials_indexing_lines():
    x = folio.tensor(rng.normal(size=(4, 8, 2)))  # (B, T, C)
    b, t = 1, 3
    xprev = x[b, :t + 1]  # the tutorial's x[b, :t+1]
    assert xprev.shape == (t + 1, 2)
    np.testing.assert_allclose(xprev.mean(axis=0).numpy(), x.numpy()[b, :t + 1].mean(0), rtol=1e-6)
    wei = folio.tril(folio.ones(8, 8))[:t, :t]  # a block_size tril cut to T, as wei[:T, :T]
    np.testing.assert_array_equal(wei.numpy(), np.tril(np.ones((t, t))))


@pytest.mark.parametrize("key, says", [
    (np.s_[::2], "step 2 on axis 0"),
    (np.s_[:, ::-1], "step -1 on axis 1"),
    ([0, 1], "a list"),
    (np.array([0, 1]), "a ndarray"),
    (np.s_[None, 0], "None"),
    (np.s_[..., 0], "ellipsis"),
    (True, "a bool"),
    (1.0, "a float"),
    ((0, 0, 0, 0), "4 indices for a tensor of shape (3, 4, 5)"),
])
def test_indexing_refuses_what_folio_has_no_op_for(key, says):
    t = folio.tensor(np.zeros((3, 4, 5)))
    with pytest.raises(IndexError, match="integers and slices of step 1") as e:
        t[key]
    assert says in str(e.value)


def test_other_bad_input_raises():
    t = folio.tensor(np.zeros((3, 4)))
    with pytest.raises(IndexError, match="index 3 is out of range for axis 0 of size 3"):
        t[3]
    with pytest.raises(IndexError, match="index -5"):
        t[:, -5]
    for huge in (2**70, np.uint64(2**64 - 1), -2**70):  # past int64: out of range, not "Unable to cast"
        with pytest.raises(IndexError, match=rf"^\[index\] index {int(huge)} is out of range for axis 0 of size 3$"):
            t[huge]
    with pytest.raises(TypeError, match="not assigned into"):
        t[0] = 1.0
    with pytest.raises(ValueError, match=r"mask \(2, 3, 4\) would broadcast x \(3, 4\)"):
        folio.masked_fill(t, np.zeros((2, 3, 4), bool), 0.0)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        folio.tril(folio.ones(3))
    with pytest.raises(ValueError, match="negative"):
        folio.ones(2, -1)
    with pytest.raises(TypeError, match="integers"):
        folio.zeros(2.5)
