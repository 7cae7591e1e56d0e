#!/usr/bin/env bash
# A recipe against the clock: for each seed, `folio train` on a budget of training
# seconds (--max-time: the steps' time; evaluations are not counted, and with no step
# limit the cosine decays over the budget), then `folio eval` of its best checkpoint on
# the whole val split. Prints a table: the full-val loss, the training time at which
# the run's own evaluations first reached the target val loss, the best of those
# evaluations, steps, training and wall time; then mean/min/max, the core count and
# the folio version and commit.
#
#   bench/speedrun.sh [--budget SECONDS] [--target LOSS] [--seeds "1337 1 2"]
#                     [--out DIR] CONFIG.ini [extra folio train options]
#
# Defaults: --budget 60, --target 1.60, --seeds "1337 1 2", --out runs/speedrun-NAME
# (NAME: the recipe's file name; each seed in DIR/seed-S). The extra options go to
# every `folio train` (e.g. --optimizer muon, --eval-interval 50: the time to the
# target is only as fine as the evaluations). The recipe's max-iters is replaced by
# --max-iters 0 (the budget alone ends the run) unless the extra options give one.
# FOLIO=path/to/folio picks the binary (default build/folio).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
folio=${FOLIO:-$here/build/folio}
budget=60 target=1.60 seeds="1337 1 2" out=""
usage() { sed -n '2,18s/^# \{0,1\}//p' "$0" >&2; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case $1 in
    --budget) budget=${2:?--budget needs seconds}; shift 2 ;;
    --target) target=${2:?--target needs a loss}; shift 2 ;;
    --seeds) seeds=${2:?--seeds needs a list}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    -h|--help) usage 0 ;;
    -*) echo "speedrun.sh: unknown option $1 (the extra folio options go after CONFIG.ini)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
config=$1; shift
extra=("$@")
[ -f "$config" ] || { echo "speedrun.sh: $config: no such recipe file" >&2; exit 2; }
[ -x "$folio" ] || { echo "speedrun.sh: $folio is not built (cmake --build build --target folio_cli)" >&2; exit 2; }
is_number() { [[ $1 =~ ^[0-9]+([.][0-9]*)?([eE][-+]?[0-9]+)?$ ]]; }
is_number "$budget" && is_number "$target" || { echo "speedrun.sh: --budget and --target must be numbers" >&2; exit 2; }
name=$(basename "$config" .ini)
out=${out:-runs/speedrun-$name}
limit=(--max-iters 0)
for a in "${extra[@]}"; do [[ $a == --max-iters* ]] && limit=(); done

mkdir -p "$out"
rows=$out/results.tsv
: >"$rows"
for seed in $seeds; do
  run=$out/seed-$seed
  rm -rf "$run"
  echo "== seed $seed: $folio train --config $config --max-time $budget ${limit[*]} --seed $seed ${extra[*]}" >&2
  start=$(date +%s.%N)  # wall time: start-up, evaluations and saves included
  "$folio" train --config "$config" --out "$run" --max-time "$budget" "${limit[@]}" --seed "$seed" "${extra[@]}" \
    --log-interval 1000000 >"$run.train.txt"
  wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  # The run's own data and split, from its saved options, for a full evaluation.
  mapfile -t split < <(python3 - "$run/state.safetensors" <<'EOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
c = json.loads(json.loads(raw[8:8 + n])["__metadata__"]["train_config"])
print(c["data"])
print(repr(1.0 - c["train_fraction"]))
EOF
)
  data=${split[0]} val_fraction=${split[1]}
  "$folio" eval --checkpoint "$run/best.safetensors" --data "$data" --val-fraction "$val_fraction" --split val \
    >"$run.eval.txt"
  python3 - "$seed" "$run/log.csv" "$run.eval.txt" "$target" "$wall" >>"$rows" <<'EOF'
import csv, sys
seed, log, evaluation, target, wall = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
rows = list(csv.DictReader(open(log)))
words = open(evaluation).read().split()
loss, bpc = float(words[words.index("loss") + 1]), float(words[words.index("bits/char") + 1])
clock = "train_s" if "train_s" in rows[0] else "elapsed_s"  # logs before train_s: wall time
reached = next((float(r[clock]) for r in rows if float(r["val_loss"]) <= target), None)
best = min(float(r["val_loss"]) for r in rows)
print(seed, f"{loss:.4f}", f"{bpc:.4f}", "-" if reached is None else f"{reached:.1f}", f"{best:.4f}",
      rows[-1]["step"], f"{float(rows[-1][clock]):.1f}", f"{wall:.1f}", sep="\t")
EOF
done

python3 - "$rows" "$target" <<'EOF'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
head = ["seed", "full-val loss", "bits/char", f"train s to val<={sys.argv[2]}", "best val (sampled)", "steps",
        "train s", "wall s"]
table = [[r[0], r[1], r[2], r[3] if r[3] != "-" else "not reached", *r[4:]] for r in rows]
for label, f in (("mean", statistics.mean), ("min", min), ("max", max)):
    summary = [label]
    for col in range(1, len(head)):
        values = [float(r[col]) for r in rows if r[col] != "-"]
        text = "-" if not values else f"{f(values):.4f}" if col in (1, 2, 4) else f"{f(values):.1f}"
        if col == 3: text += f" ({len(values)}/{len(rows)} reached)" if label == "mean" else ""
        summary.append(text)
    table.append(summary)
widths = [max(len(head[i]), *(len(r[i]) for r in table)) for i in range(len(head))]
line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))
print(line(head))
for i, r in enumerate(table):
    if i == len(rows): print("  ".join("-" * w for w in widths))
    print(line(r))
EOF
commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$here" diff --quiet HEAD 2>/dev/null || commit="$commit+changes"
echo "recipe $config, budget ${budget} s of training per seed, extra: ${extra[*]:-none}"
echo "$("$folio" --version), commit $commit, $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
echo "runs in $out (train and eval output beside each run)"
