#!/usr/bin/env bash
# The worked example of docs/chat.md, start to end: conversations of checkable tasks
# (scripts/chat_tasks.py), a base model pretrained on text (tiny shakespeare and the same
# kinds of task written as plain text), then fine-tuned on the conversations with the
# masked loss, then asked held-out prompts through folio serve's /v1/chat/completions
# (scripts/chat_accuracy.py). The training budget is the two --max-time values: 3 and 7
# minutes, 10 in all.
#   bash scripts/chat_example.sh [OUT_DIR]         (FOLIO: the binary, default build/folio)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
folio=${FOLIO:-$here/build/folio}
out=${1:-$here/runs/chat-example}
threads=${THREADS:-2}
mkdir -p "$out"
python3 "$here/scripts/chat_tasks.py" --count 30000 --seed 1 >"$out/train.jsonl"
python3 "$here/scripts/chat_tasks.py" --count 200 --seed 2 --prompts >"$out/heldout.jsonl"
{ cat "$here/data/tinyshakespeare.txt"; python3 "$here/scripts/chat_tasks.py" --count 20000 --seed 3 --text; } \
  >"$out/base.txt"

echo "== pretraining the base model (3 minutes)"
"$folio" train --data "$out/base.txt" --out "$out/base" --overwrite --n-layer 4 --n-head 4 --n-embd 128 \
  --block-size 128 --batch-size 32 --lr 2e-3 --dropout 0 --max-time 180 --eval-interval 200 --eval-iters 20 --threads "$threads"

echo "== fine-tuning it on conversations (7 minutes)"
"$folio" train --init-from "$out/base" --data "$out/train.jsonl" --out "$out/chat" --overwrite \
  --batch-size 32 --lr 1e-3 --max-time 420 --eval-interval 200 --eval-iters 20 --threads "$threads"
"$folio" eval --checkpoint "$out/chat" --data "$out/train.jsonl"

echo "== held-out prompts through /v1/chat/completions"
port=$((20000 + RANDOM % 20000))
"$folio" serve --checkpoint "$out/chat" --port "$port" --threads "$threads" >"$out/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break; sleep 0.2; done
python3 "$here/scripts/chat_accuracy.py" --url "http://127.0.0.1:$port" --prompts "$out/heldout.jsonl" --min 0.9
