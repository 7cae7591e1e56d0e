"""folio: train and run small transformer language models on CPUs, from Python.

    import folio
    model = folio.load("out")                       # a run directory or a .safetensors file
    print(model.generate("ROMEO:", max_new_tokens=100, seed=1))
    logits = model.logits(model.tokenizer.encode("To be"))  # numpy (T, V)

The engine is folio's C++ library (folio._folio); docs/python.md is the reference.
"""
from ._folio import Model, Tokenizer, __version__, load, set_threads, threads

__all__ = ["Model", "Tokenizer", "load", "set_threads", "threads", "__version__"]
