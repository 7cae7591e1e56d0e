#!/usr/bin/env bash
# The worked example of docs/chat.md, start to end: conversations of checkable tasks
# (scripts/chat_tasks.py), a base model pretrained on text (tiny shakespeare and the same
# kinds of task written as plain text), then fine-tuned on the conversations with the
# masked loss, then asked held-out prompts through folio serve's /v1/chat/completions
# (scripts/chat_accuracy.py). The training budget is the two --max-time values: 3 and 7
# minutes, 10 in all.
#   bash scripts/chat_example.sh [OUT_DIR]         (FOLIO: the binary, default build/folio)
# BASE_STEPS=N and CHAT_STEPS=N budget the two trainings by steps instead of time (the
# same recipe on a machine too busy to time it; the cosine then follows the steps).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
folio=${FOLIO:-$here/build/folio}
out=${1:-$here/runs/chat-example}
threads=${THREADS:-2}
mkdir -p "$out"
# The arithmetic kinds are the hard ones: the mix draws them three times as often as the
# others, in the conversations and in the base's text. The held-out prompts keep the even mix.
mix=add=3,subtract=3
python3 "$here/scripts/chat_tasks.py" --count 30000 --seed 1 --weights "$mix" >"$out/train.jsonl"
python3 "$here/scripts/chat_tasks.py" --count 200 --seed 2 --prompts >"$out/heldout.jsonl"
{ cat "$here/data/tinyshakespeare.txt"; python3 "$here/scripts/chat_tasks.py" --count 40000 --seed 3 --text --weights "$mix"; } \
  >"$out/base.txt"
base_budget=(--max-time 180)
chat_budget=(--max-time 420)
[ -z "${BASE_STEPS:-}" ] || base_budget=(--max-iters "$BASE_STEPS")
[ -z "${CHAT_STEPS:-}" ] || chat_budget=(--max-iters "$CHAT_STEPS")

echo "== pretraining the base model (3 minutes)"
"$folio" train --data "$out/base.txt" --out "$out/base" --overwrite --n-layer 4 --n-head 4 --n-embd 128 \
  --block-size 128 --batch-size 32 --lr 2e-3 --dropout 0 "${base_budget[@]}" --eval-interval 200 --eval-iters 20 \
  --threads "$threads"

echo "== fine-tuning it on conversations (7 minutes)"
"$folio" train --init-from "$out/base" --data "$out/train.jsonl" --out "$out/chat" --overwrite \
  --batch-size 32 --lr 1e-3 "${chat_budget[@]}" --eval-interval 200 --eval-iters 20 --threads "$threads"
"$folio" eval --checkpoint "$out/chat" --data "$out/train.jsonl"

echo "== held-out prompts through /v1/chat/completions"
port=$((20000 + RANDOM % 20000))
"$folio" serve --checkpoint "$out/chat" --port "$port" --threads "$threads" >"$out/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break; sleep 0.2; done
python3 "$here/scripts/chat_accuracy.py" --url "http://127.0.0.1:$port" --prompts "$out/heldout.jsonl" \
  --train "$out/train.jsonl" --min 0.9
