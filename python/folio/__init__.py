"""folio: train and run small transformer language models on CPUs, from Python.

    import folio
    model = folio.load("out")                       # a run directory or a .safetensors file
    print(model.generate("ROMEO:", max_new_tokens=100, seed=1))
    logits = model.logits(model.tokenizer.encode("To be"))  # numpy (T, V)
    run = folio.train(out="runs/tiny", data="input.txt", n_layer=2, max_iters=200)
    print(run.log[-1]["val_loss"], run.best.generate("A", max_new_tokens=50))
    head = folio.nn.Head(n_embd=32, head_size=16, block_size=8)  # the tutorials' modules

The engine is folio's C++ library (folio._folio); docs/python.md is the reference.
"""
import csv
import functools
import math
import os
import sys

# Every array folio takes or returns is numpy's, and the extension imports it only when
# it first needs it: without this check, `import folio` worked and the first call failed.
try:
    import numpy  # noqa: F401
except ImportError as missing:
    raise ImportError(
        f"folio needs numpy, which this interpreter ({sys.executable}) cannot import: the module is built for "
        "Debian's /usr/bin/python3, whose numpy is python3-numpy (scripts/setup.sh installs it). Run "
        "/usr/bin/python3 (bash scripts/python.sh does), or install numpy for this interpreter.") from missing

from ._folio import Model, Tokenizer, __version__, load, set_threads, threads
from ._folio import (Tensor, causal_softmax, cross_entropy, dropout, exp, gelu, layer_norm, log, log_softmax, matmul,
                     masked_fill, ones, relu, softmax, tanh, tensor, tril, zeros)
from ._folio import sum  # noqa: A004 (folio.sum as torch.sum; this file uses no builtin sum)
from ._folio import is_grad_enabled
from . import _folio
from . import nn

__all__ = ["Model", "Tokenizer", "Run", "load", "train", "set_threads", "threads", "__version__",
           "Tensor", "tensor", "matmul", "softmax", "log_softmax", "causal_softmax", "relu", "gelu", "tanh", "exp", "log",
           "layer_norm", "cross_entropy", "dropout", "masked_fill", "tril", "ones", "zeros", "sum", "nn",
           "no_grad", "is_grad_enabled"]


class no_grad:
    """Ops record no graph in this block (or function), as torch.no_grad(): for an optimizer step.

        with folio.no_grad():
            for p in model.parameters():
                p -= lr * p.grad          # in p's own storage

    Used as a decorator (@folio.no_grad()), the whole function runs so. Grad mode is each
    thread's own; blocks nest, and the mode before comes back when one ends, however it ends.
    """

    def __init__(self):
        self._scopes = []  # one guard per `with` under way (the same object may be entered again)

    def __enter__(self):
        scope = _folio._NoGradScope()
        scope.enter()
        self._scopes.append(scope)

    def __exit__(self, *exc):
        self._scopes.pop().exit()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def without_grad(*args, **kwargs):
            with no_grad():
                return fn(*args, **kwargs)
        return without_grad


class Run:
    """A run directory: what folio.train returns, or Run(path) for any run."""

    def __init__(self, path):
        self.path = os.fspath(path)

    @property
    def log(self):
        """log.csv's rows as dicts of numbers (step an int; NaN where a run has no figure)."""
        with open(os.path.join(self.path, "log.csv"), newline="") as f:
            return [{k: int(v) if k == "step" else float(v) for k, v in row.items()} for row in csv.DictReader(f)]

    @property
    def best(self):
        """The Model of the lowest validation loss (best.safetensors)."""
        return load(os.path.join(self.path, "best.safetensors"))

    @property
    def model(self):
        """The Model of the last save (model.safetensors)."""
        return load(self.path)

    def __repr__(self):
        return f"folio.Run({self.path!r})"


def train(out, data, *, on_step=None, on_eval=None, **options):
    """Trains a model as `folio train` does, with the same options, and returns its Run.

    Args:
        out: the run directory (--out). One that holds a run needs resume=True or overwrite=True.
        data: the text file or token directory to train on (--data).
        on_step: called after every step with a dict: step, loss, lr, tokens_per_sec, train_s.
        on_eval: called after every evaluation with log.csv's row as a dict: step, train_loss,
            val_loss, lr, tokens_per_sec, elapsed_s, val_bpc, train_s, val_bpb.
        **options: folio train's options by name, dashes as underscores: n_layer=2, lr=3e-3,
            max_iters=500, resume=True, quiet=True, config="configs/shakespeare-char.ini", ...
            (`folio train --help` lists them). True gives a switch, False or None leaves it out;
            a repeatable option takes a list: eval_task=["arc.jsonl", "gsm8k.jsonl"].
            An unknown option or a bad value raises ValueError naming it.

    Returns:
        Run. Ctrl-C (or SIGTERM) stops the run after its step and saves it, as in the command,
        then raises KeyboardInterrupt (RuntimeError for SIGTERM): train(..., resume=True) continues it.
    """
    # Checked before the run: called only once it is under way, a callback of the wrong
    # kind ended it at its first step, after overwrite=True had replaced the run there.
    for name, callback in (("on_step", on_step), ("on_eval", on_eval)):
        if callback is not None and not callable(callback):
            raise TypeError(f"[train] {name} must be a callable taking one dict (or None), "
                            f"got {type(callback).__name__}")
    status = _folio._train({"out": os.fspath(out), "data": os.fspath(data), **options}, on_step, on_eval)
    if status == 128 + _folio._SIGINT:
        raise KeyboardInterrupt(f"training stopped and saved in {os.fspath(out)}: resume with resume=True")
    if status != 0:
        raise RuntimeError(f"training stopped by signal {status - 128} and saved in {os.fspath(out)}: "
                           "resume with resume=True")
    return Run(out)
