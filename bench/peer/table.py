#!/usr/bin/python3
"""Reads the JSON lines of folio_step.sh and torch_gpt.py (one per process run) and prints
the side-by-side markdown tables: medians over the repetitions, per config, thread count
and dtype; then, when the runs have more than one dtype, the ratios per config and thread
count (folio/torch in fp32 and in bf16, and each side's bf16/fp32).

    bench/peer/table.py results.jsonl

A line without "dtype" (from before bf16 was compared) counts as fp32. A line with
"error" (a run that could not be made, e.g. "not supported: ...") is listed under the
tables, and its cells say "not supported".
"""
import json
import statistics
import sys
from collections import defaultdict

ORDER = {"T": 0, "S": 1, "M": 2}
DTYPES = {"fp32": 0, "bf16": 1}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def ratio(num, den, missing="-"):
    """'**median ratio** (min-max of the per-alternation ratios)' of two lists of
    successful runs, paired by repetition; `missing` when either side has none."""
    if not num or not den:
        return missing
    by_rep = {r.get("rep"): r for r in den}
    pair = [a["tokens_per_sec"] / by_rep[a.get("rep")]["tokens_per_sec"] for a in num if a.get("rep") in by_rep]
    spread = f" ({min(pair):.2f}-{max(pair):.2f})" if pair else ""
    return f"**{med([r['tokens_per_sec'] for r in num]) / med([r['tokens_per_sec'] for r in den]):.2f}**{spread}"


def load(path):
    """(config, threads) -> dtype -> impl -> [successful run], and the failed runs."""
    runs = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    failed = []
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        r.setdefault("dtype", "fp32")
        if r.get("error"):
            failed.append(r)
            runs[(r["config"], r["threads"])][r["dtype"]]  # the row shows, with its cells empty
        else:
            runs[(r["config"], r["threads"])][r["dtype"]][r["impl"]].append(r)
    return runs, failed


def cell(rs, key, fmt, fails):
    if rs:
        return format(med([r[key] for r in rs]), fmt)
    return "not supported" if fails else "-"


def main(path):
    runs, failed = load(path)
    keys = sorted(runs, key=lambda k: (ORDER.get(k[0], 9), k[1]))
    failed_at = defaultdict(list)  # (config, threads, dtype, impl) -> [run]
    for r in failed:
        failed_at[(r["config"], r["threads"], r["dtype"], r["impl"])].append(r)
    print("| config | threads | dtype | folio tok/s | torch tok/s | ratio folio/torch (min-max) | folio ms/step "
          "| torch ms/step | folio GFLOP/s | torch GFLOP/s | folio peak RSS MB | torch peak RSS MB "
          "| other work, cores (max) | runs |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for (cfg, th) in keys:
        for dt in sorted(runs[(cfg, th)], key=lambda d: DTYPES.get(d, 9)):
            f, t = runs[(cfg, th)][dt]["folio"], runs[(cfg, th)][dt]["torch"]
            ff, tf = failed_at[(cfg, th, dt, "folio")], failed_at[(cfg, th, dt, "torch")]
            # What the rest of the machine used during (else just before) each run: the worst one.
            noise = [r.get("busy_during", r.get("busy_before")) for r in f + t]
            noise = max([n for n in noise if n is not None], default=float("nan"))
            steps = lambda rs: "/".join(str(r["steps"]) for r in rs) or "-"  # noqa: E731
            print(f"| {cfg} | {th} | {dt} | {cell(f, 'tokens_per_sec', ',.0f', ff)} "
                  f"| {cell(t, 'tokens_per_sec', ',.0f', tf)} | {ratio(f, t, 'not supported' if ff or tf else '-')} "
                  f"| {cell(f, 'ms_per_step', '.2f', ff)} | {cell(t, 'ms_per_step', '.2f', tf)} "
                  f"| {cell(f, 'gflops', '.1f', ff)} | {cell(t, 'gflops', '.1f', tf)} "
                  f"| {cell(f, 'peak_rss_mb', '.0f', ff)} | {cell(t, 'peak_rss_mb', '.0f', tf)} "
                  f"| {noise:.2f}{' !' if noise >= 0.25 else ''} "
                  f"| {len(f)}+{len(t)} (timed steps folio {steps(f)}, torch {steps(t)}) |")
    print("\n`other work`: CPU the rest of the machine used while a run of that row ran (busy time in"
          " /proc/stat minus the run's own), the worst of its runs; `!` marks 0.25 core or more:"
          " that row was disturbed.")
    if len({dt for k in keys for dt in runs[k]}) > 1:
        print("\n### Ratios of tokens/s (medians; min-max of the per-alternation ratios)\n")
        print("| config | threads | folio/torch fp32 | folio/torch bf16 | folio bf16/fp32 | torch bf16/fp32 |")
        print("|---|---|---:|---:|---:|---:|")
        for (cfg, th) in keys:
            d = runs[(cfg, th)]

            def rat(a, b):  # a, b: (dtype, impl)
                fails = failed_at[(cfg, th, *a)] or failed_at[(cfg, th, *b)]
                return ratio(d[a[0]][a[1]], d[b[0]][b[1]], "not supported" if fails else "-")
            print(f"| {cfg} | {th} | {rat(('fp32', 'folio'), ('fp32', 'torch'))} "
                  f"| {rat(('bf16', 'folio'), ('bf16', 'torch'))} "
                  f"| {rat(('bf16', 'folio'), ('fp32', 'folio'))} "
                  f"| {rat(('bf16', 'torch'), ('fp32', 'torch'))} |")
        print("\nbf16: folio runs every matrix product in bf16 with fp32 sums and outputs"
              " (TrainStepBf16); torch runs forward and loss under torch.autocast(\"cpu\","
              " dtype=torch.bfloat16), whose products have bf16 outputs.")
    if failed:
        print("\nRuns that could not be made:\n")
        seen = set()
        for r in failed:
            key = (r["impl"], r["dtype"], r["config"], r["threads"], r["error"])
            if key not in seen:
                seen.add(key)
                print(f"- {r['impl']} {r['dtype']}, config {r['config']}, threads {r['threads']}: {r['error']}")
    base = [r.get("rss_after_import_mb") for k in runs for d in runs[k].values() for r in d["torch"]]
    base = [b for b in base if b]
    if base:
        print(f"\ntorch peak RSS includes the Python interpreter and libtorch: "
              f"{min(base):.0f}-{max(base):.0f} MB right after `import torch`, before the model exists.")


if __name__ == "__main__":
    main(sys.argv[1])
