"""Tensor's in-place operators (-=, +=, *=, /=) and folio.no_grad, by torch's rules: a
hand-written optimizer step changes the parameters themselves, refused outside
no_grad on a tensor that requires grad, keeping the left side's shape, and a graph
that saved the old values refuses backward()."""
import re
import threading

import numpy as np
import pytest

import folio


def test_sgd_step_changes_the_modules_own_parameters():
    # Without __isub__, `p -= lr * p.grad` rebound the loop's name to a new tensor: the
    # module kept its weights and the loop trained nothing, without a word.
    lin = folio.nn.Linear(3, 2, seed=5)
    before = {name: p.numpy().copy() for name, p in lin.named_parameters().items()}
    x = folio.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    (lin(x) * lin(x)).sum().backward()
    grads = {name: p.grad.numpy().copy() for name, p in lin.named_parameters().items()}
    with folio.no_grad():
        for p in lin.parameters():
            same = p
            p -= 0.1 * p.grad
            assert p is same  # the very object, updated, not a new tensor under its name
    for name, p in lin.named_parameters().items():
        np.testing.assert_allclose(p.numpy(), before[name] - np.float32(0.1) * grads[name], rtol=1e-6)
        assert p.requires_grad and p.grad is not None


def test_a_hand_written_sgd_loop_trains():
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(32, 4)).astype(np.float32)
    ys = xs @ np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
    W = folio.tensor(np.zeros((4, 1)), requires_grad=True)
    x, y = folio.tensor(xs), folio.tensor(ys.reshape(32, 1))
    losses = []
    for _ in range(50):
        d = x @ W - y
        loss = (d * d).mean()
        losses.append(loss.item())
        W.zero_grad()
        loss.backward()
        with folio.no_grad():
            W -= 0.1 * W.grad
    assert losses[-1] < 1e-3 * losses[0]


@pytest.mark.parametrize("op", ["-=", "+=", "*=", "/="])
def test_outside_no_grad_a_tensor_that_requires_grad_is_refused(op):
    W = folio.tensor([1.0, 2.0], requires_grad=True)
    scope = {"W": W}
    with pytest.raises(ValueError, match=rf"^\[{re.escape(op)}\] changes a tensor that requires grad \(shape \(2,\)\) "
                                         r"in place, .*`with folio\.no_grad\(\):`"):
        exec(f"W {op} 2.0", scope)
    assert scope["W"] is W and W.numpy().tolist() == [1.0, 2.0]
    # A right side that requires grad: its gradient cannot flow through an in-place write.
    x = folio.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match=r"right side that requires grad"):
        x += W
    assert x.numpy().tolist() == [1.0, 2.0]


def test_the_operators_on_plain_tensors_and_what_shares_their_memory():
    x = folio.tensor(np.ones((2, 3)))
    view = x.numpy()
    x += np.array([1.0, 2.0, 3.0])   # (3,) broadcasts into (2, 3)
    x *= 2
    x -= folio.tensor([[1.0], [2.0]])  # (2, 1) too
    x /= np.float32(2)
    expected = ((np.ones((2, 3)) + [1, 2, 3]) * 2 - [[1], [2]]) / 2
    np.testing.assert_allclose(view, expected)  # the same storage, no new tensor
    x -= x  # the right side is the left one: computed aside, then written
    assert not view.any()
    # The gradient is a tensor too: W.grad *= 0 clears it, as W.grad.zero_() in torch.
    W = folio.tensor([1.0, 2.0], requires_grad=True)
    (W * W).sum().backward()
    g = W.grad
    g *= 0
    assert W.grad.numpy().tolist() == [0.0, 0.0]


def test_the_result_keeps_the_left_sides_shape():
    x = folio.tensor([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"^\[\+=\] the result has shape \(2, 3\), not the left side's \(3,\): .*"
                                         r"right side \(shape \(2, 3\)\) must broadcast into it"):
        x += np.ones((2, 3))
    with pytest.raises(ValueError, match="do not broadcast"):
        x += np.ones(4)
    assert x.numpy().tolist() == [1.0, 2.0, 3.0]


def test_a_graph_that_saved_the_old_values_refuses_backward():
    W = folio.tensor([1.0, 2.0], requires_grad=True)
    saved = (W * W).sum()  # mul's gradient reads W
    not_saved = (W + 1.0).sum()  # add's reads nothing of W
    with folio.no_grad():
        W -= 1.0
    with pytest.raises(ValueError, match=r"^\[backward\] a tensor that mul saved for its gradient was modified"):
        saved.backward()
    assert W.grad is None  # refused before any gradient was written
    not_saved.backward()
    assert W.grad.numpy().tolist() == [1.0, 1.0]
    # A tensor without grad that a graph saved is guarded as well.
    x = folio.tensor([3.0, 4.0])
    y = (W * x).sum()
    x += 1.0
    with pytest.raises(ValueError, match=r"modified in place"):
        y.backward()


def test_no_grad_records_nothing_and_restores_the_mode():
    W = folio.tensor([1.0, 2.0], requires_grad=True)
    assert folio.is_grad_enabled()
    block = folio.no_grad()
    with block:
        assert not folio.is_grad_enabled() and not (W * 2).requires_grad
        with block:  # nested, even the same object
            assert not folio.is_grad_enabled()
        assert not folio.is_grad_enabled()
    assert folio.is_grad_enabled() and (W * 2).requires_grad
    with pytest.raises(KeyError):
        with folio.no_grad():
            raise KeyError("out")
    assert folio.is_grad_enabled()

    @folio.no_grad()
    def step(p):
        """One step."""
        p -= 1.0
        return folio.is_grad_enabled()

    assert step(W) is False and step.__doc__ == "One step." and folio.is_grad_enabled()
    assert W.numpy().tolist() == [0.0, 1.0]
    # Each thread has its own mode, as in torch.
    seen = []
    with folio.no_grad():
        thread = threading.Thread(target=lambda: seen.append(folio.is_grad_enabled()))
        thread.start()
        thread.join()
    assert seen == [True]
