#!/usr/bin/python3
"""Reads the JSON lines of folio_step.sh and torch_gpt.py (one per process run) and prints
the side-by-side markdown table: medians over the repetitions, per config and thread count.

    bench/peer/table.py results.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def main(path):
    runs = defaultdict(lambda: defaultdict(list))  # (config, threads) -> impl -> [run]
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            runs[(r["config"], r["threads"])][r["impl"]].append(r)
    order = {"T": 0, "S": 1, "M": 2}
    print("| config | threads | folio tok/s | torch tok/s | ratio folio/torch (min-max) | folio ms/step "
          "| torch ms/step | folio GFLOP/s | torch GFLOP/s | folio peak RSS MB | torch peak RSS MB "
          "| other work, cores (max) | runs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for (cfg, th) in sorted(runs, key=lambda k: (order.get(k[0], 9), k[1])):
        f, t = runs[(cfg, th)]["folio"], runs[(cfg, th)]["torch"]
        ftok, ttok = med([r["tokens_per_sec"] for r in f]), med([r["tokens_per_sec"] for r in t])
        # Per-alternation ratios: each folio run against the torch run of the same repetition.
        trep = {r.get("rep"): r for r in t}
        pair = [a["tokens_per_sec"] / trep[a.get("rep")]["tokens_per_sec"] for a in f if a.get("rep") in trep]
        spread = f"{min(pair):.2f}-{max(pair):.2f}" if pair else "-"
        # What the rest of the machine used during (else just before) each run: the worst one.
        noise = [r.get("busy_during", r.get("busy_before")) for r in f + t]
        noise = max([n for n in noise if n is not None], default=float("nan"))
        steps = lambda rs: "/".join(str(r["steps"]) for r in rs)  # noqa: E731
        print(f"| {cfg} | {th} | {ftok:,.0f} | {ttok:,.0f} | **{ftok / ttok:.2f}** ({spread}) "
              f"| {med([r['ms_per_step'] for r in f]):.2f} | {med([r['ms_per_step'] for r in t]):.2f} "
              f"| {med([r['gflops'] for r in f]):.1f} | {med([r['gflops'] for r in t]):.1f} "
              f"| {med([r['peak_rss_mb'] for r in f]):.0f} | {med([r['peak_rss_mb'] for r in t]):.0f} "
              f"| {noise:.2f}{' !' if noise >= 0.25 else ''} | {len(f)}+{len(t)} (timed steps folio {steps(f)}, torch {steps(t)}) |")
    print("\n`other work`: CPU the rest of the machine used while a run of that row ran (busy time in"
          " /proc/stat minus the run's own), the worst of its runs; `!` marks 0.25 core or more:"
          " that row was disturbed.")
    base = [r.get("rss_after_import_mb") for k in runs for r in runs[k]["torch"]]
    base = [b for b in base if b]
    if base:
        print(f"\ntorch peak RSS includes the Python interpreter and libtorch: "
              f"{min(base):.0f}-{max(base):.0f} MB right after `import torch`, before the model exists.")


if __name__ == "__main__":
    main(sys.argv[1])
