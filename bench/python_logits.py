#!/usr/bin/env python3
"""The Python module's overhead: Model.logits on a 64-token prompt against the same call
in C++ (bench/bench_logits.cpp), measured alternately, round after round, so that a
change in the machine's load falls on both.

    PYTHONPATH=build/python python3 bench/python_logits.py runs/x --rounds 5

Each round: bench_logits (Google Benchmark's real time per call), then as many calls
from Python, timed in one loop (the median of 5 loops). Both run on --threads threads.
Prints each round's pair and the ratio of the medians; the target is within 10 %.
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np

import folio

HERE = os.path.dirname(os.path.abspath(__file__))


def cxx_micros(binary, checkpoint, threads):
    env = {**os.environ, "FOLIO_BENCH_CHECKPOINT": checkpoint}
    out = subprocess.run([binary, f"--threads={threads}", "--benchmark_format=json", "--benchmark_min_time=0.5"],
                         env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)["benchmarks"][0]["real_time"]  # microseconds (kMicrosecond)


def python_micros(model, ids, calls):
    loops = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            model.logits(ids)
        loops.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(loops)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", help="a run directory or .safetensors file (block_size >= 64 for 64 tokens)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--binary", default=os.path.join(HERE, "..", "build", "bench", "bench_logits"))
    args = ap.parse_args()
    folio.set_threads(args.threads)
    model = folio.load(args.checkpoint)
    V, T = model.config["vocab_size"], min(64, model.config["block_size"])
    ids = np.array([7 * i % V for i in range(T)], dtype=np.int32)  # the C++ call's type: the cheapest copy
    cxx, py = [], []
    for r in range(args.rounds):
        cxx.append(cxx_micros(args.binary, args.checkpoint, args.threads))
        py.append(python_micros(model, ids, calls=max(10, int(0.5e6 / cxx[-1]))))
        print(f"round {r + 1}: C++ {cxx[-1]:.1f} us, Python {py[-1]:.1f} us ({py[-1] / cxx[-1]:.3f}x)", flush=True)
    c, p = statistics.median(cxx), statistics.median(py)
    print(f"T={T}, {args.threads} thread(s): C++ {c:.1f} us, Python {p:.1f} us per call: {p / c:.3f}x "
          f"({(p / c - 1) * 100:+.1f} %)")


if __name__ == "__main__":
    main()
