"""folio.nn from Python: Linear, Head, MultiHead and GPT against the tutorials' maths in
numpy (the GPT against scripts/folio_numpy.py), their gradients from .backward() against
central differences (tests/python/gradcheck.py, the C++ check's eps and tolerances), and
parameters that are the modules' own memory."""
import gc
import sys

import numpy as np
import pytest

import folio
from conftest import ROOT
from gradcheck import gradcheck

sys.path.insert(0, str(ROOT / "scripts"))
import folio_numpy  # noqa: E402  (the model in numpy alone)

rng = np.random.default_rng(11)


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def head_reference(x, key, query, value):
    """The tutorials' head in float64: x (B, T, C), weights (hs, C) -> (B, T, hs), (B, T, T)."""
    k, q, v = x @ key.T, x @ query.T, x @ value.T
    T = x.shape[1]
    wei = np.where(np.tril(np.ones((T, T))) == 1, q @ k.transpose(0, 2, 1) * k.shape[-1] ** -0.5, -np.inf)
    wei = softmax(wei)
    return wei @ v, wei


def scale(module, factor):
    """Every weight times factor, in place: N(0, 0.02) weights attend almost uniformly,
    where a gradient check would prove little (as nn/gradcheck_layers.cpp scales them)."""
    for p in module.parameters():
        p.numpy(writable=True)[...] *= factor


def weights(module):
    return {name: p.numpy().astype(np.float64) for name, p in module.named_parameters().items()}


TINY_GPT = dict(vocab_size=7, block_size=6, n_layer=2, n_head=2, n_embd=8, activation="gelu")  # as the C++ check's
IDS, TARGETS = [[1, 3, 5, 0], [6, 2, 2, 4]], [[3, 5, 0, 6], [2, 2, 4, 1]]  # (2, 4) each


def test_linear():
    lin = folio.nn.Linear(4, 3, seed=5)
    assert lin.weight.shape == (3, 4) and lin.bias.shape == (3,) and lin.weight.requires_grad
    assert list(lin.named_parameters()) == ["weight", "bias"] and lin.num_parameters == 15
    assert abs(lin.weight.numpy().std() - 0.02) < 0.015 and not lin.bias.numpy().any()
    lin.bias.numpy(writable=True)[...] = [0.5, -1.0, 2.0]
    x = folio.tensor(rng.normal(size=(2, 5, 4)), requires_grad=True)
    np.testing.assert_allclose(lin(x).numpy(), x.numpy() @ lin.weight.numpy().T + lin.bias.numpy(), rtol=1e-5, atol=1e-6)
    assert gradcheck(lambda: lin(x), [lin.weight, lin.bias, x]) == []
    assert folio.nn.Linear(4, 3, bias=False).bias is None
    assert repr(lin) == "<folio.nn.Linear 4 -> 3, bias>"


def test_head_is_the_tutorials():
    head = folio.nn.Head(n_embd=6, head_size=4, block_size=8, seed=1)
    scale(head, 25.0)
    assert list(head.named_parameters()) == ["key.weight", "query.weight", "value.weight"]
    x = folio.tensor(rng.normal(size=(2, 5, 6)), requires_grad=True)
    out, wei = head(x, return_weights=True)
    w = weights(head)
    ref_out, ref_wei = head_reference(x.numpy().astype(np.float64), w["key.weight"], w["query.weight"], w["value.weight"])
    np.testing.assert_allclose(wei.numpy(), ref_wei, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-4, atol=1e-5)
    assert gradcheck(lambda: head(x), head.parameters() + [x]) == []


def test_multihead_concatenates_then_projects():
    mh = folio.nn.MultiHead(n_embd=6, n_head=3, head_size=2, block_size=8, seed=1)
    scale(mh, 25.0)
    x = folio.tensor(rng.normal(size=(2, 4, 6)), requires_grad=True)
    out, wei = mh(x, return_weights=True)
    assert wei.shape == (2, 3, 4, 4) and len(mh.heads) == 3
    assert repr(mh) == "<folio.nn.MultiHead 3 heads of 2, 6 channels, context 8>"
    w, xs = weights(mh), x.numpy().astype(np.float64)
    heads = [head_reference(xs, *(w[f"heads.{h}.{n}.weight"] for n in ("key", "query", "value"))) for h in range(3)]
    np.testing.assert_allclose(wei.numpy(), np.stack([h[1] for h in heads], 1), rtol=1e-4, atol=1e-6)
    ref = np.concatenate([h[0] for h in heads], -1) @ w["proj.weight"].T + w["proj.bias"]
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)
    # The modules the heads list holds are the MultiHead's own.
    assert np.shares_memory(mh.heads[1].key.weight.numpy(), mh.named_parameters()["heads.1.key.weight"].numpy())
    assert gradcheck(lambda: mh(x), mh.parameters() + [x]) == []


def test_gpt_equals_numpy_forward():
    gpt = folio.nn.GPT(seed=3, **TINY_GPT)
    scale(gpt, 4.0)
    logits, loss = gpt(np.array(IDS), np.array(TARGETS, dtype=np.int32))
    assert logits.shape == (2, 4, 7) and loss.shape == ()
    ref = folio_numpy.forward(weights(gpt), gpt.config, np.array(IDS))
    np.testing.assert_allclose(logits.numpy(), ref, rtol=1e-4, atol=1e-4)
    logp = ref - np.log(np.exp(ref).sum(-1, keepdims=True))
    nll = -np.take_along_axis(logp, np.array(TARGETS)[..., None], -1).mean()
    assert loss.item() == pytest.approx(nll, rel=1e-5)
    assert gpt(IDS)[1] is None


def test_gpt_gradients_equal_finite_differences():
    # Every parameter of a two-layer GPT, through its loss: about 1,900 weights, each
    # nudged both ways (about 3,800 forward passes of 8 tokens).
    gpt = folio.nn.GPT(seed=1337, **TINY_GPT)
    scale(gpt, 4.0)
    ids, targets = np.array(IDS, dtype=np.int32), np.array(TARGETS, dtype=np.int32)
    assert gradcheck(lambda: gpt(ids, targets)[1], gpt.parameters()) == []


def test_gpt_options_by_name():
    gpt = folio.nn.GPT(vocab_size=11, block_size=4, n_layer=1, n_head=2, n_embd=8, pos="rope", qk_norm=True)
    assert gpt.config["pos"] == "rope" and gpt.config["qk_norm"] and gpt.config["vocab_size"] == 11
    assert "position_embedding.weight" not in gpt.named_parameters()
    assert folio.nn.GPT(seed=7, **TINY_GPT).parameters()[0].numpy().tolist() == \
        folio.nn.GPT(seed=7, **TINY_GPT).parameters()[0].numpy().tolist()
    with pytest.raises(ValueError, match=r"unknown option 'n_layr' \(did you mean n_layer\?\)"):
        folio.nn.GPT(n_layr=2)
    with pytest.raises(ValueError, match="not divisible by n_head 3"):
        folio.nn.GPT(n_head=3)
    with pytest.raises(ValueError, match=r"\[GPT\] activation must be"):
        folio.nn.GPT(activation="swish")
    with pytest.raises(ValueError, match="finite number"):
        folio.nn.GPT(dropout=float("nan"))
    with pytest.raises(TypeError, match="seed must be an int"):
        folio.nn.GPT(seed=1.5)
    # 2.5 is inside [1, 256]: what is wrong with it is that it is no integer.
    for value, shown in ((2.5, "2.5"), ("2", '"2"')):
        with pytest.raises(ValueError, match=rf"^\[GPT\] n_layer = {shown} is not an integer \(in \[1, 256\]\)"):
            folio.nn.GPT(n_layer=value)


def test_gpt_bad_ids():
    gpt = folio.nn.GPT(seed=1, **TINY_GPT)
    with pytest.raises(TypeError, match=r"\[GPT\] ids must be integers .*got float64"):
        gpt(np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"must be 2-D \(B, T\), got shape \(3,\)"):
        gpt([1, 2, 3])
    with pytest.raises(ValueError, match=r"ids\[1\] is 7, outside the vocabulary \[0, 7\)"):
        gpt([[0, 7]])
    with pytest.raises(ValueError, match="more than block_size 6"):
        gpt(np.zeros((1, 7), dtype=np.int32))
    with pytest.raises(ValueError, match=r"targets must have ids' shape \(1, 2\), got \(1, 3\)"):
        gpt([[0, 1]], [[1, 2, 3]])
    assert gpt([[0, 1]])[0].shape == (1, 2, 7)  # and it lives on


def test_parameters_are_the_modules_memory():
    gpt = folio.nn.GPT(seed=1, **TINY_GPT)
    bias = gpt.named_parameters()["lm_head.bias"]
    assert np.shares_memory(bias.numpy(), gpt.named_parameters()["lm_head.bias"].numpy())
    with pytest.raises(ValueError):
        bias.numpy()[0] = 1.0  # read-only unless asked
    before = gpt(IDS)[0].numpy().copy()
    bias.numpy(writable=True)[2] += 1.5  # a write through the view is the model's
    after = gpt(IDS)[0].numpy()
    np.testing.assert_allclose(after[..., 2] - before[..., 2], 1.5, atol=1e-5)
    # .backward() fills the same tensors' .grad; zero_grad() clears them.
    gpt(IDS, TARGETS)[1].backward()
    assert bias.grad is not None and np.abs(bias.grad.numpy()).sum() > 0
    gpt.zero_grad()
    assert not bias.grad.numpy().any()


def test_a_parameter_view_outlives_its_module():
    lin = folio.nn.Linear(64, 64, seed=2)
    view, saved = lin.weight.numpy(), lin.weight.numpy().copy()
    del lin
    gc.collect()
    for _ in range(3):  # new modules would take the freed memory over
        for p in folio.nn.Linear(64, 64, seed=3).parameters():
            p.numpy(writable=True)[...] = 7.0
    np.testing.assert_array_equal(view, saved)


def test_train_and_eval_switch_dropout():
    head = folio.nn.Head(n_embd=4, head_size=4, block_size=8, dropout=0.5, seed=1)
    x = folio.tensor(rng.normal(size=(1, 8, 4)))
    assert head.training and head.eval() is head and not head.training
    np.testing.assert_array_equal(head(x).numpy(), head(x).numpy())  # no dropout in eval
    head.train()
    assert not np.array_equal(head(x).numpy(), head(x).numpy())  # a fresh mask each call
