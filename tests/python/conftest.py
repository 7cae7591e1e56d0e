"""Shared fixtures of the Python module's tests (run by ctest as Python.Pytest, with
PYTHONPATH at the build tree's package and FOLIO_BINARY at the folio command).

A tiny model is trained once per session with the folio command, and every test
compares the module against that command or against numpy."""
import os
import pathlib
import subprocess

import pytest

import folio as folio_module

# One thread for folio's computations in the tests' own thread: the tests' tensors are
# tiny, and on a machine shared with other work a team of threads waiting for cores
# turned a two-second gradient check into twenty.
folio_module.set_threads(1)

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLIO = os.environ.get("FOLIO_BINARY", str(ROOT / "build" / "folio"))
# Two layers of two heads, 16 channels, a context of 16: trained for 30 steps in well
# under a second, enough to move each weight away from its initial draw.
TINY = ["--n-layer", "2", "--n-head", "2", "--n-embd", "16", "--block-size", "16", "--batch-size", "4",
        "--max-iters", "30", "--eval-interval", "10", "--eval-iters", "2", "--quiet", "--threads", "1"]


def folio(*args, **kwargs):
    """Runs the folio command; its standard output as bytes."""
    return subprocess.run([FOLIO, *map(str, args)], check=True, stdout=subprocess.PIPE, **kwargs).stdout


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "corpus.txt"
    path.write_bytes((ROOT / "data" / "tinyshakespeare.txt").read_bytes()[:20000])
    return path


@pytest.fixture(scope="session")
def run(tmp_path_factory, corpus):
    """A run directory trained by the folio command."""
    out = tmp_path_factory.mktemp("runs") / "tiny"
    folio("train", "--data", corpus, "--out", out, *TINY)
    return out
