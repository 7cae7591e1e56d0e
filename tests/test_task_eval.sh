#!/usr/bin/env bash
# folio eval --task against tests/task_scores_numpy.py, an independent numpy scorer
# written from lm-eval's code: for a char model and a SentencePiece BPE model, on task
# files in HellaSwag's exact layout, the plain one and ARC's (letters and digits as
# labels, 3 to 5 choices, contexts long enough to be cut to the window, one ending in a
# space, and choices with characters of two bytes), every choice's summed
# log-probability agrees to 1e-3, and so do pred, pred_norm, the items cut and acc.
# The files are made so that llm.c's normalisation by tokens, and one by bytes, pick
# otherwise than lm-eval's by characters on some items: a scorer that divided by either
# would fail.
#   test_task_eval.sh FOLIO_BINARY        (exit 77: no numpy or python3-sentencepiece)
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
python=/usr/bin/python3  # Debian's, where python3-numpy installs (scripts/setup.sh)
"$python" -c "import numpy, sentencepiece" 2>/dev/null || { echo "skipped: $python lacks numpy or sentencepiece"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-task-eval.XXXXXX")
trap 'rm -rf "$work"' EXIT
# ARC's contexts are "Question: ...\nAnswer:", and this part of the corpus has no Q. Its
# last 4000 bytes come again with é for e and ö for o, letters of two bytes that the
# models learn as well as the others: on such choices, dividing by bytes instead of
# characters picks otherwise.
{
  head -c 20000 "$here/data/tinyshakespeare.txt"
  printf 'Question: Answer:\n'
  head -c 20000 "$here/data/tinyshakespeare.txt" | tail -c 4000 | sed 's/e/\xc3\xa9/g; s/o/\xc3\xb6/g'
} >"$work/corpus.txt"

# The tasks: contexts and choices cut from the corpus (so a char vocabulary has their
# characters), the right choice being the text that follows the context.
"$python" - "$work" <<'EOF'
import json, random, sys
work = sys.argv[1]
text = open(f"{work}/corpus.txt", encoding="utf-8").read()
words = text.split()
rng = random.Random(7)
def span(n):
    at = rng.randrange(len(words) - n)
    return " ".join(words[at:at + n])
def item(context_words, n_choices):
    at = rng.randrange(len(words) - 30)
    context = " ".join(words[at:at + context_words])
    right = " ".join(words[at + context_words:at + context_words + rng.randint(1, 3)])
    choices = [span(rng.randint(1, 3)) for _ in range(n_choices - 1)]
    label = rng.randrange(n_choices)
    choices.insert(label, right)
    return context, choices, label
with open(f"{work}/hellaswag.jsonl", "w") as f:
    for i in range(12):
        ctx, endings, label = item(rng.choice([2, 4, 16]), 4)
        f.write(json.dumps({"ind": i, "activity_label": "Reading", "ctx_a": ctx, "ctx_b": "", "ctx": ctx,
                            "endings": endings, "source_id": "corpus", "split": "val", "split_type": "indomain",
                            "label": label}) + "\n")
with open(f"{work}/plain.jsonl", "w") as f:
    for i in range(12):
        ctx, choices, label = item(rng.choice([1, 3, 16]), rng.choice([2, 3]))
        f.write(json.dumps({"context": ctx + (" " if i % 3 == 0 else ""), "choices": choices, "answer": label}) + "\n")
    f.write("\n")  # a blank line is skipped
with open(f"{work}/arc.jsonl", "w") as f:
    for i in range(12):
        ctx, choices, label = item(rng.choice([2, 12]), rng.choice([3, 4, 5]))
        labels = "ABCDE" if i % 2 else "12345"
        f.write(json.dumps({"id": f"q{i}", "question": {"stem": ctx, "choices": [
            {"text": c, "label": labels[j]} for j, c in enumerate(choices)]}, "answerKey": labels[label]}) + "\n")
# Choices whose characters are several bytes (SentencePiece's byte fallback reads them).
with open(f"{work}/unicode.jsonl", "w") as f:
    for i in range(8):
        ctx, choices, label = item(rng.choice([3, 20]), 4)
        choices = [c.replace("e", "\u00e9").replace("o", "\u00f6") if j % 2 else c for j, c in enumerate(choices)]
        f.write(json.dumps({"context": ctx, "choices": choices, "answer": label}, ensure_ascii=False) + "\n")
# Generative items: a prompt from the corpus and its next word; two in GSM8K's layout.
with open(f"{work}/generative.jsonl", "w") as f:
    for i in range(10):
        ctx, choices, label = item(rng.choice([2, 5, 16]), 2)
        f.write(json.dumps({"prompt": ctx, "answer": choices[label]}) + "\n")
    for i in range(2):
        ctx, choices, label = item(4, 2)
        f.write(json.dumps({"question": ctx, "answer": "so it is\n#### 7"}) + "\n")
EOF

declare -A options=(
  [char]="--max-iters 40"
  [bpe]="--max-iters 40 --tokenizer bpe --vocab-size 400"
)
declare -A tasks=([char]="hellaswag plain arc unicode" [bpe]="hellaswag plain arc unicode")
for model in char bpe; do
  # shellcheck disable=SC2086  # the options are words
  "$folio" train --data "$work/corpus.txt" --out "$work/$model" --n-layer 2 --n-head 2 --n-embd 16 \
    --block-size 48 --batch-size 4 --eval-interval 20 --eval-iters 2 --lr 1e-2 ${options[$model]} --quiet --threads 1
  for task in ${tasks[$model]}; do
    "$folio" eval --checkpoint "$work/$model" --task "$work/$task.jsonl" --batch-size 7 --threads 1 \
      --log-samples "$work/$model-$task.folio.jsonl" --json >"$work/$model-$task.json"
    "$python" "$here/tests/task_scores_numpy.py" --checkpoint "$work/$model" --task "$work/$task.jsonl" \
      >"$work/$model-$task.numpy.jsonl"
    "$python" - "$work/$model-$task" "$model $task" <<'EOF'
import json, math, sys
stem, name = sys.argv[1], sys.argv[2]
ours = [json.loads(l) for l in open(stem + ".folio.jsonl")]
theirs = [json.loads(l) for l in open(stem + ".numpy.jsonl")]
summary = json.load(open(stem + ".json"))
assert len(ours) == len(theirs) == summary["n"], (name, len(ours), len(theirs), summary["n"])
worst = 0.0
for i, (a, b) in enumerate(zip(ours, theirs)):
    assert len(a["logprobs"]) == len(b["logprobs"]), (name, i)
    worst = max([worst] + [abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"])])
    assert a["label"] == b["label"], (name, i, a["label"], b["label"])
    assert a["cut"] == b["cut"], (name, i, "cut", a["cut"], b["cut"])
    assert a["pred"] == b["pred"], (name, i, "pred", a, b)
    assert a["pred_norm"] == b["pred_norm"], (name, i, "pred_norm", a, b)
assert worst <= 1e-3, f"FAILED: {name}: a choice's log-probability differs by {worst}"
n = len(theirs)
acc = sum(b["pred"] == b["label"] for b in theirs) / n
acc_norm = sum(b["pred_norm"] == b["label"] for b in theirs) / n
def stderr(p):  # sample std of n 0/1 scores with mean p, over sqrt(n)
    return math.sqrt(p * (1 - p) * n / (n - 1)) / math.sqrt(n)
assert abs(summary["acc"] - acc) < 1e-12 and abs(summary["acc_norm"] - acc_norm) < 1e-12, (name, summary, acc, acc_norm)
assert abs(summary["acc_stderr"] - stderr(acc)) < 1e-9, (name, summary["acc_stderr"], stderr(acc))
assert abs(summary["acc_norm_stderr"] - stderr(acc_norm)) < 1e-9, (name, summary["acc_norm_stderr"], stderr(acc_norm))
assert summary["cut"] == sum(b["cut"] for b in theirs), (name, summary["cut"])
by_tokens = sum(b["pred_norm_tokens"] != b["pred_norm"] for b in theirs)
by_bytes = sum(b["pred_norm_bytes"] != b["pred_norm"] for b in theirs)
print(f"{name}: {n} items, worst |difference| {worst:.2e}, acc {acc:.3f} acc_norm {acc_norm:.3f}, "
      f"{summary['cut']} cut, dividing by tokens picks otherwise {by_tokens} times, by bytes {by_bytes}")
open(stem + ".by_tokens", "w").write(f"{by_tokens}\n")
open(stem + ".by_bytes", "w").write(f"{by_bytes}\n")
EOF
  done
done
# Generative: folio's greedy text equals numpy's, item by item, and so does the exact
# match; the stop strings are ones the char model's text meets within its 20 tokens. Then answers are planted: a file whose every other answer is the text the model
# writes (the rest cannot match) must score exactly their share, scored in the same
# command as the first file (two --task, two JSON lines).
for model in char bpe; do
  gen="$work/gen-$model"
  stops=(--stop "e " --stop ",")
  "$folio" eval --checkpoint "$work/$model" --task "$work/generative.jsonl" --max-new-tokens 20 --threads 1 \
    --batch-size 5 "${stops[@]}" --log-samples "$gen.folio.jsonl" --json >"$gen.out"
  "$python" "$here/tests/task_scores_numpy.py" --checkpoint "$work/$model" --task "$work/generative.jsonl" \
    --max-new-tokens 20 "${stops[@]}" >"$gen.numpy.jsonl"
  "$python" - "$gen" "$work/generative.jsonl" "$work/planted.jsonl" <<'EOF'
import json, sys
stem, task, planted = sys.argv[1:4]
ours = [json.loads(l) for l in open(stem + ".folio.jsonl")]
theirs = [json.loads(l) for l in open(stem + ".numpy.jsonl")]
summary = json.load(open(stem + ".out"))
assert len(ours) == len(theirs) == summary["n"] == 12, (stem, len(ours), len(theirs))
for i, (a, b) in enumerate(zip(ours, theirs)):
    # SentencePiece's decode drops the first piece's leading space, which folio's stream keeps.
    assert a["output"].strip() == b["output"].strip(), (stem, i, a["output"], b["output"])
    assert (a["pred"], a["label"], a["exact_match"]) == (b["pred"], b["label"], b["exact_match"]), (stem, i, a, b)
assert summary["exact_match"] == sum(b["exact_match"] for b in theirs) / 12, summary
assert ours[10]["label"] == "7", ours[10]  # GSM8K's "#### 7"
prompts = [json.loads(l).get("prompt") for l in open(task)]
right = [i % 2 == 0 and b["pred"] != "" for i, b in enumerate(theirs[:10])]
with open(planted, "w") as f:
    for i, b in enumerate(theirs[:10]):
        f.write(json.dumps({"prompt": prompts[i], "answer": b["output"] if right[i] else "nothing written"}) + "\n")
open(planted + ".share", "w").write(str(sum(right) / 10))
stopped = sum(b["stopped"] for b in theirs)
# The BPE model, trained 40 steps, writes one piece over and over: the char model's
# text is the one that meets the stops.
assert stopped > 0 or stem.endswith("bpe"), f"FAILED: {stem}: no text met a stop string: the test does not reach them"
print(f"{stem}: 12 generative items as numpy writes them ({stopped} cut short by a stop), exact_match {summary['exact_match']}")
EOF
  "$folio" eval --checkpoint "$work/$model" --task "$work/generative.jsonl" --task "$work/planted.jsonl" \
    --max-new-tokens 20 "${stops[@]}" --threads 1 --json >"$gen.both.out"
  "$python" - "$gen.both.out" "$work/planted.jsonl.share" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
share = float(open(sys.argv[2]).read())
assert [l["task"] for l in lines] == ["generative", "planted"], lines
assert share >= 0.3, f"FAILED: only {share} of the planted answers are text the model writes"
assert abs(lines[1]["exact_match"] - share) < 1e-12, f"FAILED: planted answers score {lines[1]['exact_match']}, not {share}"
print(f"planted answers score {share} as they must")
EOF
done

cut=$(cat "$work"/*.json | "$python" -c "import json, sys; print(sum(json.loads(l)['cut'] for l in sys.stdin))")
by_tokens=$(( $(cat "$work"/*.by_tokens | paste -sd+) ))
[ "$cut" -gt 0 ] || { echo "FAILED: no item was cut to the window: the test does not reach that rule" >&2; exit 1; }
by_bytes=$(( $(cat "$work"/*.by_bytes | paste -sd+) ))
[ "$by_tokens" -gt 0 ] || { echo "FAILED: no item tells characters from tokens apart" >&2; exit 1; }
[ "$by_bytes" -gt 0 ] || { echo "FAILED: no item tells characters from bytes apart" >&2; exit 1; }
echo "folio eval --task matches numpy's lm-eval scorer ($cut items cut; dividing by tokens would pick otherwise" \
  "$by_tokens times, by bytes $by_bytes)"
