"""Model.save: the checkpoint folio train writes, read back by the folio command, written
whole or not at all, and never over a file unless asked."""
import os
import re

import numpy as np
import pytest

import folio
from conftest import folio as folio_cmd


def greedy_cli(checkpoint, prompt, n):
    return folio_cmd("generate", "--checkpoint", checkpoint, "--prompt", prompt, "--max-new-tokens", n, "--greedy",
                     "--threads", "1")


def test_save_of_a_loaded_model_is_the_runs_own_file(run, tmp_path):
    out = tmp_path / "copy.safetensors"
    folio.load(run).save(out)
    assert out.read_bytes() == (run / "model.safetensors").read_bytes()


def test_weights_changed_in_python_reach_folio_generate(run, tmp_path):
    # A model changed through its writable views had no way out of the process: no file
    # that folio generate --checkpoint or folio export could read.
    model = folio.load(run)
    rng = np.random.default_rng(11)
    for view in model.parameters(writable=True).values():
        view += rng.normal(0, 0.3, view.shape).astype(np.float32)
    out = tmp_path / "tuned.safetensors"
    model.save(str(out))
    text = model.generate("ROMEO:", max_new_tokens=40, greedy=True)
    cli = greedy_cli(out, "ROMEO:", 40)
    assert cli == ("ROMEO:" + text + "\n").encode()
    assert cli != greedy_cli(run, "ROMEO:", 40)  # the changed weights were saved, not the run's
    again = folio.load(out)
    assert again.config == model.config and again.step == model.step
    ids = model.tokenizer.encode("To be, or")
    np.testing.assert_array_equal(again.logits(ids), model.logits(ids))


def test_save_refuses_to_replace_what_it_was_not_asked_to(run, tmp_path):
    model = folio.load(run)
    out = tmp_path / "m.safetensors"
    out.write_bytes(b"precious")
    with pytest.raises(FileExistsError,
                       match=rf"^\[save\] {re.escape(str(out))} already exists: overwrite=True replaces it"):
        model.save(out)
    assert out.read_bytes() == b"precious"
    model.save(out, overwrite=True)
    assert folio.load(out).step == model.step
    with pytest.raises(ValueError, match=rf"^\[save\] {re.escape(str(tmp_path))} is a directory: give a file's path"):
        model.save(tmp_path, overwrite=True)
    link = tmp_path / "link.safetensors"
    link.symlink_to(out)
    with pytest.raises(ValueError, match=r"is not a regular file .* would replace it"):
        model.save(link, overwrite=True)
    assert link.is_symlink()
    with pytest.raises(FileNotFoundError, match=r"^\[save\] .*: the directory .*nowhere does not exist"):
        model.save(tmp_path / "nowhere" / "m.safetensors")
    with pytest.raises(TypeError, match=r"^\[save\] path must be a str or an os.PathLike"):
        model.save(3)
    # Nothing half-written was left behind by any of them.
    assert sorted(os.listdir(tmp_path)) == ["link.safetensors", "m.safetensors"]

