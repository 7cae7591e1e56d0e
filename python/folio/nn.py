"""folio.nn: the modules the tutorials build, on folio's autograd.

    import folio, numpy as np
    head = folio.nn.Head(n_embd=32, head_size=16, block_size=8)
    x = folio.tensor(np.random.randn(4, 8, 32))           # (B, T, C)
    out, weights = head(x, return_weights=True)           # (4, 8, 16), (4, 8, 8)
    out.sum().backward()
    head.key.weight.grad                                  # (16, 32)

    gpt = folio.nn.GPT(vocab_size=65, block_size=8, n_layer=2, n_head=2, n_embd=32)
    logits, loss = gpt(ids, targets)                      # ids, targets (B, T) ints

Each is folio's C++ module (folio._folio.nn); docs/python.md is the reference.
"""
from ._folio import nn as _nn

Module = _nn.Module
Linear = _nn.Linear
Head = _nn.Head
MultiHead = _nn.MultiHead
GPT = _nn.GPT

__all__ = ["Module", "Linear", "Head", "MultiHead", "GPT"]
