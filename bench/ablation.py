#!/usr/bin/python3
"""Ablation of `folio train` options at a fixed wall-clock budget, run fairly on a shared
2-core machine.

  bench/ablation.py --recipe configs/shakespeare-3min.ini --budget 165 --seeds 1337,1 \\
      --variant base= --variant "ema=--ema 0.99" --variant "wsd=--decay wsd --cooldown 0.3"

Each variant is NAME=OPTIONS: `folio train` options added to the recipe's. For each one:
1. Its quiet speed: `--probe-steps` steps alone on `--probe-threads` threads (the
   threads the recipe runs on), nothing else running. The steps the budget buys are
   budget / (seconds a step), so a variant that slows the step gets fewer of them.
   Only the base and the variants named by --probe are probed; the others change
   nothing a step computes (an average of the weights, a schedule) and take the base's
   count, so that the probes' own noise (~10 % here) decides nothing. `--steps N` gives
   the count instead (and skips the probes).
2. Its runs: that many steps for each seed (`--max-iters N --max-time 0`: the
   schedule follows the steps as it would follow the clock), `--jobs` at a time on one
   thread each. The loss after a number of steps does not depend on how busy the
   machine is, so runs can share it; only the probes must be alone.
3. `folio eval` of each run's best checkpoint over the whole val split.

With --peer, the variants are options of the PyTorch twin, bench/peer/torch_train.py
(Debian's python3-torch), which gets the same protocol: its probes on --probe-threads
threads, its runs on one, the whole val split scored at the end (its last weights: it
keeps no best checkpoint). --recipe is then unused.

Prints and writes OUT/results.md (and .tsv): per variant the steps, each seed's full-val
loss, their mean and its difference from the first variant's mean (the base).
FOLIO=path picks the binary (default build/folio).
"""
import argparse
import concurrent.futures
import csv
import json
import os
import shlex
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipe", default="", help="a configs/*.ini file")
    p.add_argument("--peer", action="store_true", help="the variants are bench/peer/torch_train.py's options")
    p.add_argument("--budget", type=float, required=True, help="training seconds of the budget")
    p.add_argument("--seeds", default="1337", help="comma-separated seeds")
    p.add_argument("--variant", action="append", required=True, help="NAME=OPTIONS (the first is the base)")
    p.add_argument("--steps", type=int, default=0, help="steps for every variant (0: probe each one's speed)")
    p.add_argument("--steps-of", action="append", default=[],
                   help="NAME=N: the steps of one variant, measured before (skips its probe)")
    p.add_argument("--probe", default="", help="comma-separated variants that change the step's cost")
    p.add_argument("--probe-steps", type=int, default=40)
    p.add_argument("--probe-threads", type=int, default=2)
    p.add_argument("--jobs", type=int, default=2, help="runs at a time, one thread each")
    p.add_argument("--out", default="runs/ablation")
    p.add_argument("--data", default="", help="--data for every run (default: the recipe's)")
    a = p.parse_args()
    variants = []
    for v in a.variant:
        name, sep, options = v.partition("=")
        if not sep or not name or "/" in name:
            sys.exit(f"ablation.py: --variant {v!r}: expected NAME=OPTIONS")
        variants.append((name, shlex.split(options)))
    if len({n for n, _ in variants}) != len(variants):
        sys.exit("ablation.py: two variants share a name")
    if not a.peer and not a.recipe:
        sys.exit("ablation.py: --recipe is needed (or --peer)")
    return a, variants


def folio():
    return os.environ.get("FOLIO", os.path.join(REPO, "build", "folio"))


def train(args, run, options, extra):
    """Trains into the directory `run`; returns the whole val split's loss (a float) of
    the best checkpoint (folio) or of the last weights (the peer), and seconds a step."""
    os.makedirs(run, exist_ok=True)
    if args.peer:
        cmd = ["/usr/bin/python3", os.path.join(REPO, "bench", "peer", "torch_train.py"), "--out",
               os.path.join(run, "log.csv")] + options + extra
        if args.data:
            cmd += ["--data", args.data]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        result = json.loads(out.strip().splitlines()[-1])
        return result["final_val_loss"], result["train_s"] / result["steps"]
    cmd = [folio(), "train", "--config", args.recipe, "--out", run, "--overwrite", "--quiet"] + options + extra
    if args.data:
        cmd += ["--data", args.data]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(run, "log.csv")) as f:
        last = list(csv.DictReader(f))[-1]
    seconds = float(last["train_s"]) / int(last["step"])
    out = subprocess.run([folio(), "eval", "--checkpoint", os.path.join(run, "best.safetensors"), "--split", "val",
                          "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["loss"], seconds


def probe(args, name, options):
    """Seconds a step takes, alone on probe_threads threads."""
    _, seconds = train(args, os.path.join(args.out, "probe-" + name), options,
                       ["--max-iters", str(args.probe_steps), "--max-time", "0", "--eval-interval", "1000000",
                        "--eval-iters", "1", "--threads", str(args.probe_threads)])
    return seconds


def one_run(args, name, options, seed, steps):
    run = os.path.join(args.out, f"{name}-seed{seed}")
    start = time.time()
    loss, _ = train(args, run, options,
                    ["--max-iters", str(steps), "--max-time", "0", "--seed", str(seed), "--threads", "1"])
    print(f"[ablation] {name} seed {seed}: {steps} steps, full-val {loss:.4f} ({time.time() - start:.0f} s)",
          flush=True)
    return loss


def main():
    args, variants = parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s]
    os.makedirs(args.out, exist_ok=True)
    steps = {}
    probed = {variants[0][0]} | {n for n in args.probe.split(",") if n}
    given = {k: int(v) for k, _, v in (x.partition("=") for x in args.steps_of)}
    for name, options in variants:
        if name in given:
            steps[name] = given[name]
            continue
        if args.steps or name not in probed:
            steps[name] = args.steps or steps[variants[0][0]]
            continue
        seconds = probe(args, name, options)
        steps[name] = max(1, int(args.budget / seconds))
        print(f"[ablation] {name}: {1e3 * seconds:.1f} ms a step on {args.probe_threads} threads, "
              f"{steps[name]} steps in {args.budget:g} s", flush=True)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {(name, seed): pool.submit(one_run, args, name, options, seed, steps[name])
                   for name, options in variants for seed in seeds}
        losses = {key: f.result() for key, f in futures.items()}
    mean = {name: sum(losses[(name, s)] for s in seeds) / len(seeds) for name, _ in variants}
    base = variants[0][0]
    what = "PyTorch peer (bench/peer/torch_train.py)" if args.peer else f"Recipe {args.recipe}"
    lines = [f"{what}, {args.budget:g} s of training at each variant's quiet "
             f"{args.probe_threads}-thread speed; full-val loss of the best checkpoint.", "",
             "| variant | options | steps | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | Δ vs base |",
             "|---|---|---:|" + "---:|" * len(seeds) + "---:|---:|"]
    with open(os.path.join(args.out, "results.tsv"), "w") as tsv:
        for name, options in variants:
            delta = "" if name == base else f"{mean[name] - mean[base]:+.4f}"
            cells = " | ".join(f"{losses[(name, s)]:.4f}" for s in seeds)
            lines.append(f"| {name} | `{' '.join(options)}` | {steps[name]} | {cells} | {mean[name]:.4f} | {delta} |")
            for s in seeds:
                tsv.write(f"{name}\t{' '.join(options)}\t{steps[name]}\t{s}\t{losses[(name, s)]:.5f}\n")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
