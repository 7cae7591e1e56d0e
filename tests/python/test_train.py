"""folio.train: folio train's options and run from Python, the callbacks, and Ctrl-C."""
import linecache
import os
import signal
import sys
import threading
import time

import pytest

import folio
from conftest import ROOT, TINY


def options(**more):
    """TINY's flags as keyword arguments: --n-layer 2 is n_layer=2, --quiet is quiet=True."""
    out, args = {}, list(TINY)
    while args:
        flag = args.pop(0)[2:].replace("-", "_")
        out[flag] = True if not args or args[0].startswith("--") else args.pop(0)
    return {**out, **more}


def test_train_writes_the_commands_checkpoint(run, corpus, tmp_path):
    steps, evals = [], []
    result = folio.train(tmp_path / "py", corpus, on_step=steps.append, on_eval=evals.append, **options())
    for name in ("model.safetensors", "best.safetensors"):
        assert (tmp_path / "py" / name).read_bytes() == (run / name).read_bytes(), name
    assert [s["step"] for s in steps] == list(range(1, 31))
    log = result.log
    assert [e["step"] for e in evals] == [row["step"] for row in log] == [0, 10, 20, 30]
    for e, row in zip(evals, log):
        assert e["val_loss"] == pytest.approx(row["val_loss"], rel=1e-5)
    assert result.best.config == folio.load(str(run)).config


def test_bad_options_raise_value_error(corpus, tmp_path):
    with pytest.raises(ValueError, match=r"unknown option 'n_layr' \(did you mean n_layer\?\)"):
        folio.train(tmp_path / "a", corpus, n_layr=2)
    with pytest.raises(ValueError, match="--lr"):
        folio.train(tmp_path / "b", corpus, lr=-1.0, max_iters=1)
    with pytest.raises(ValueError, match="quiet is True or False"):
        folio.train(tmp_path / "c", corpus, quiet="yes")
    with pytest.raises(ValueError, match=r"must be a number, a str or a bool, got \[2\] \(list\): only a repeatable"):
        folio.train(tmp_path / "d", corpus, n_layer=[2])
    with pytest.raises(ValueError, match="eval_task's items must be a str or a path, got None"):
        folio.train(tmp_path / "f", corpus, eval_task=["a.jsonl", None])
    with pytest.raises(ValueError, match=r"^\[train\] the argument \('two'\) for option '--n-layer' is invalid"):
        folio.train(tmp_path / "e", corpus, n_layer="two")
    assert not (tmp_path / "b").exists()


def test_a_repeatable_option_takes_a_list(corpus, tmp_path):
    # folio train --eval-task A --eval-task B: a column in log.csv for each file.
    for name, item in (("choice", '{"context": "To be", "choices": ["or", "not"], "answer": 0}'),
                       ("gen", '{"prompt": "To be", "answer": "x"}')):
        (tmp_path / f"{name}.jsonl").write_text(item + "\n")
    tasks = [tmp_path / "choice.jsonl", str(tmp_path / "gen.jsonl")]
    run = folio.train(tmp_path / "run", corpus, **options(max_iters=10, eval_task=tasks))
    assert {"choice", "gen"} <= set(run.log[-1])
    one = folio.train(tmp_path / "one", corpus, **options(max_iters=10, eval_task=(str(tasks[1]),)))
    assert "gen" in one.log[-1] and "choice" not in one.log[-1]


def test_a_recipes_options_are_those_of_its_call_alone(corpus, tmp_path):
    # One process parses many calls: an option one call's recipe set is not said to come
    # from a recipe in the next call, which has none.
    recipe = tmp_path / "inf.ini"
    recipe.write_text("lr = inf\n")
    with pytest.raises(ValueError, match=r"\(--lr from --config "):
        folio.train(tmp_path / "a", corpus, config=str(recipe), max_iters=1)
    with pytest.raises(ValueError, match="--lr must be positive, got -1") as refused:
        folio.train(tmp_path / "b", corpus, lr=-1.0, max_iters=1)
    assert "--config" not in str(refused.value)


def test_ctrl_c_saves_a_run_that_resumes(run, corpus, tmp_path):
    def interrupt(step):
        if step["step"] == 12:
            os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        folio.train(tmp_path / "cut", corpus, on_step=interrupt, **options())
    assert folio.load(str(tmp_path / "cut")).step == 12
    folio.train(tmp_path / "cut", corpus, resume=True, quiet=True, threads=1)
    assert (tmp_path / "cut" / "model.safetensors").read_bytes() == (run / "model.safetensors").read_bytes()


def test_a_callback_that_cannot_be_called_is_refused_before_the_run(corpus, tmp_path):
    # Found where it was first called, once the run was under way: with overwrite=True
    # the run that was there had lost its log.csv (on_eval) or its weights (on_step).
    out = tmp_path / "kept"
    folio.train(out, corpus, **options(max_iters=10))
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    with pytest.raises(TypeError, match=r"^\[train\] on_eval must be a callable taking one dict \(or None\), got int$"):
        folio.train(out, corpus, on_eval=3, **options(overwrite=True))
    with pytest.raises(TypeError, match=r"^\[train\] on_step must be a callable .*, got str$"):
        folio.train(out, corpus, on_step="print", **options(overwrite=True))
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before


def test_ctrl_c_while_the_run_reads_its_data_stops_it(tmp_path):
    # Before the loop, Python's handler hears Ctrl-C and kept it pending while the run
    # trained to its end. A thread sends SIGINT once the main thread is inside the call
    # (GIL released): reading 2 MB of text outlasts that by far, and should the loop have begun
    # all the same, the trainer's handler stops it: the test passes either way.
    data = tmp_path / "big.txt"
    data.write_bytes((ROOT / "data" / "tinyshakespeare.txt").read_bytes() * 2)
    main = threading.main_thread()

    def interrupt():
        while True:
            frame = sys._current_frames().get(main.ident)
            if frame is not None and frame.f_code.co_name == "train" and "_train(" in \
                    linecache.getline(frame.f_code.co_filename, frame.f_lineno):
                break
            time.sleep(0.001)
        signal.pthread_kill(main.ident, signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    sender.start()
    with pytest.raises(KeyboardInterrupt, match="training stopped and saved"):
        folio.train(tmp_path / "cut", data, **options(max_iters=2000, eval_interval=500))
    sender.join()
    assert folio.load(str(tmp_path / "cut")).step < 2000
