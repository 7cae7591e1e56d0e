"""examples/python/ runs: each script as a newcomer would run it."""
import os
import subprocess
import sys

from conftest import ROOT

EXAMPLES = ROOT / "examples" / "python"


def script(name, *args):
    return subprocess.run([sys.executable, str(EXAMPLES / name), *map(str, args)], check=True,
                          stdout=subprocess.PIPE, text=True, env=os.environ).stdout


def test_attention_heatmap_writes_a_png(run, tmp_path):
    out = script("attention_heatmap.py", run, "To be, or", "--layer", 1, "--head", 1, "--out", tmp_path / "h.png")
    assert "layer 1, head 1, 9 tokens" in out
    assert (tmp_path / "h.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_prints_three_val_losses(corpus, tmp_path):
    out = script("sweep.py", "--data", corpus, "--out", tmp_path, "--max-iters", 8)
    rows = out.strip().splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["8", "16", "32"]
    for r in rows:
        last, best = map(float, r.split()[1:])
        assert 0 < best <= last < 10


def test_gpt_by_hand_learns(corpus):
    # One thread: the model is tiny, and a team of threads on a busy machine only waits.
    out = subprocess.run([sys.executable, str(EXAMPLES / "gpt_by_hand.py"), "--data", str(corpus), "--steps", "50"],
                         check=True, stdout=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout
    losses = [float(line.split()[-1]) for line in out.splitlines() if line.startswith("step")]
    assert len(losses) == 2 and losses[1] < losses[0] - 0.5, out
