"""The kinds of argument the module takes as Python itself does: numpy's scalars as
numbers (what has __index__ is an integer, what has __float__ a real number), any
os.PathLike as a path, [] as no ids to decode; and what it refuses, by name."""
import pathlib

import numpy as np
import pytest

import folio
from conftest import TINY
from test_nn import TINY_GPT


class Index:
    """An integer that is no int, as a 0-d torch tensor is: only __index__."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def numpy_options():
    """TINY's flags as keyword arguments, each number a numpy scalar, each switch np.True_."""
    out, args = {}, list(TINY)
    while args:
        flag = args.pop(0)[2:].replace("-", "_")
        out[flag] = np.True_ if not args or args[0].startswith("--") else np.int64(args.pop(0))
    return out


def test_train_takes_numpy_numbers(run, corpus, tmp_path):
    folio.train(tmp_path / "np", corpus, **numpy_options())
    # The same flags as the command's run: the same checkpoint, byte for byte.
    assert (tmp_path / "np" / "model.safetensors").read_bytes() == (run / "model.safetensors").read_bytes()
    # A float32 reaches --lr's own check, not a refusal of its type.
    with pytest.raises(ValueError, match="--lr"):
        folio.train(tmp_path / "lr", corpus, lr=np.float32(-1.0), max_iters=1)
    with pytest.raises(ValueError, match=r"n_layer must be a number, a str or a bool, got \[2\] \(list\)"):
        folio.train(tmp_path / "list", corpus, n_layer=[2])
    assert not (tmp_path / "lr").exists() and not (tmp_path / "list").exists()


def test_generate_takes_numpy_and_index_seeds(run):
    model = folio.load(str(run))
    text = model.generate("A", max_new_tokens=8, seed=1)
    assert model.generate("A", max_new_tokens=8, seed=np.int64(1)) == text
    assert model.generate("A", max_new_tokens=8, seed=Index(1)) == text
    assert "".join(model.stream("A", max_new_tokens=8, seed=np.uint64(1))) == text
    with pytest.raises(TypeError, match="seed must be an int, got float"):
        model.generate("A", seed=1.5)
    with pytest.raises(TypeError, match="seed must be an int, got str"):
        model.generate("A", seed="1")
    with pytest.raises(TypeError, match="seed must be an int, got bool"):
        model.generate("A", seed=True)  # as folio.nn.GPT(seed=True): a flag is no seed
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2\*\*64\), got -1"):
        model.generate("A", seed=-1)


def test_gpt_takes_numpy_numbers():
    plain = folio.nn.GPT(seed=7, dropout=0.5, **TINY_GPT)
    numpy = folio.nn.GPT(seed=np.int64(7), dropout=np.float32(0.5), **{k: np.int64(v) if isinstance(v, int) else v for k, v in TINY_GPT.items()})
    assert numpy.config == plain.config
    assert numpy.parameters()[0].numpy().tolist() == plain.parameters()[0].numpy().tolist()
    with pytest.raises(ValueError, match=r"dropout must be a finite number, a str or a bool, got nan \(float32\)"):
        folio.nn.GPT(dropout=np.float32("nan"))
    with pytest.raises(TypeError, match="seed must be an int, got bool"):
        folio.nn.GPT(seed=np.True_)


def test_tensors_take_numpy_numbers():
    assert folio.ones(np.int64(2), Index(3)).shape == (2, 3)
    assert (folio.ones(2) * np.float32(3)).numpy().tolist() == [3.0, 3.0]
    with pytest.raises(TypeError, match="dimensions are integers, got 2.0"):
        folio.ones(2.0)


def test_load_takes_a_path_object(run):
    by_str, by_path = folio.load(str(run)), folio.load(pathlib.Path(run))
    assert by_path.path == by_str.path and by_path.config == by_str.config
    assert folio.load(run / "best.safetensors").step == folio.load(str(run / "best.safetensors")).step
    with pytest.raises(FileNotFoundError):
        folio.load(pathlib.Path(run) / "missing")
    with pytest.raises(TypeError, match=r"\[load\] path must be a str or an os.PathLike .*got int"):
        folio.load(3)


def test_decode_of_no_ids_is_no_text(run):
    tokenizer = folio.load(str(run)).tokenizer
    assert tokenizer.encode("") == []
    assert tokenizer.decode([]) == ""
    assert tokenizer.decode(np.array([], dtype=np.int64)) == ""
    # A prompt of ids still needs one.
    with pytest.raises(ValueError, match="is empty"):
        folio.load(str(run)).logits([])


def test_stop_of_the_wrong_kind_is_named(run):
    model = folio.load(str(run))
    with pytest.raises(TypeError, match="stop must be a str or a list of str, got int"):
        model.generate("A", max_new_tokens=4, stop=5)
    with pytest.raises(TypeError, match="stop must be a str or a list of str, got int"):
        model.stream("A", max_new_tokens=4, stop=5)
    with pytest.raises(TypeError, match="each of stop must be a str, got int"):
        model.generate("A", max_new_tokens=4, stop=["x", 5])
    assert model.generate("A", max_new_tokens=4, stop=("never-there",)) == model.generate("A", max_new_tokens=4)
    # bytes iterate as ints: named as what they are, not as a list of ints.
    with pytest.raises(TypeError, match="^\\[generate\\] stop must be a str or a list of str, got bytes$"):
        model.generate("A", max_new_tokens=4, stop=b"x")
