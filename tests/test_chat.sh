#!/usr/bin/env bash
# Chat fine-tuning end to end, through the folio binary:
#  1. conversations that are wrong (a malformed line, an unknown role, no assistant
#     turn, empty or non-string content, one longer than the context) exit 2 naming the
#     line, and write nothing;
#  2. a base char model fine-tuned --init-from on conversations grows two rows (the
#     template's tokens) and reports the targets it counted and masked;
#  3. folio eval's loss over the assistant tokens equals numpy's (tests/chat_loss_numpy.py),
#     and numpy's with the user's tokens counted does not (the check can fail);
#  4. stopped mid fine-tune and resumed, it ends bit for bit where the straight run ends
#     (random sampling, whose batches group rows by length, and epoch sampling);
#  5. folio chat, stdin not a terminal: one reply a line, /reset; a base model says it
#     uses the plain template;
#  6. on 2 MPI ranks it trains as one process does (skipped without mpirun);
#  7. folio serve's /v1/chat/completions and, where the Python module is built beside the
#     binary, model.chat give folio chat's greedy reply (the same template, the same end).
#   test_chat.sh FOLIO_BINARY            (exit 77: skipped, no numpy)
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
python=/usr/bin/python3
"$python" -c "import numpy" 2>/dev/null || { echo "skipped: $python has no numpy"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-chat.XXXXXX")
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
"$python" "$here/scripts/chat_tasks.py" --count 120 --seed 1 >"$work/chat.jsonl"
{ head -c 20000 "$here/data/tinyshakespeare.txt"; "$python" "$here/scripts/chat_tasks.py" --count 300 --seed 3 --text; } \
  >"$work/base.txt"
small=(--n-layer 1 --n-head 2 --n-embd 32 --block-size 128 --dropout 0 --threads 1 --quiet)
# The schedule is given: its defaults follow --max-iters, which a run cut at step 10 and
# resumed to 20 would not share with a straight run to 20.
loud=(--batch-size 6 --eval-iters 2 --eval-interval 10 --lr 1e-2 --warmup-iters 2 --lr-decay-iters 20 --threads 1)
run=("${loud[@]}" --quiet)
"$folio" train --data "$work/base.txt" "${small[@]}" "${run[@]}" --max-iters 10 --out "$work/base" 2>/dev/null

echo "== 1. bad conversations: exit 2, the line named, nothing written"
ok='{"messages":[{"role":"user","content":"Copy: ab"},{"role":"assistant","content":"ab"}]}'
refuse() {  # refuse WHAT LINE2 EXPECTED
  printf '%s\n%s\n%s\n' "$ok" "$2" "$ok" >"$work/bad.jsonl"
  local code=0
  "$folio" train --init-from "$work/base" --data "$work/bad.jsonl" "${run[@]}" --max-iters 2 --out "$work/bad" \
    2>"$work/bad.err" || code=$?
  [ "$code" -eq 2 ] || { echo "FAILED: $1: exit $code"; cat "$work/bad.err"; exit 1; }
  grep -qF "$3" "$work/bad.err" || { echo "FAILED: $1: the message lacks '$3'"; cat "$work/bad.err"; exit 1; }
  [ ! -e "$work/bad" ] || { echo "FAILED: $1: it wrote $work/bad"; exit 1; }
  echo "refused: $1"
}
refuse "malformed JSON" '{"messages": [' "bad.jsonl:2: not one JSON value"
refuse "an unknown role" '{"messages":[{"role":"robot","content":"x"},{"role":"assistant","content":"y"}]}' \
  'bad.jsonl:2: message 0: unknown role "robot"'
refuse "no assistant turn" '{"messages":[{"role":"user","content":"x"}]}' "bad.jsonl:2: the conversation has no assistant"
refuse "empty content" '{"messages":[{"role":"user","content":""},{"role":"assistant","content":"y"}]}' \
  "bad.jsonl:2: message 0 (user): content is empty"
refuse "content not a string" '{"messages":[{"role":"user","content":["x"]},{"role":"assistant","content":"y"}]}' \
  "bad.jsonl:2: message 0 (user): content must be a string, got array"
long=$(printf "Copy: %0150d" 0)
refuse "too long for the context" "{\"messages\":[{\"role\":\"user\",\"content\":\"$long\"},{\"role\":\"assistant\",\"content\":\"y\"}]}" \
  "bad.jsonl:2: the conversation has"

echo "== 2. fine-tune a base model on conversations"
"$folio" train --init-from "$work/base" --data "$work/chat.jsonl" "${loud[@]}" --max-iters 20 --out "$work/chat" \
  2>"$work/chat.err" | tee "$work/chat.out"
grep -q "<|im_start|> and <|im_end|>" "$work/chat.out" || { echo "FAILED: no note of the grown vocabulary"; exit 1; }
grep -q "conversations: 108 train / 12 val, one a row; the loss counts" "$work/chat.out" ||
  { echo "FAILED: no counts of the conversations"; exit 1; }
grep -q "conversations: the loss counted .* of them padding" "$work/chat.out" ||
  { echo "FAILED: no counts of the run's targets and padding"; exit 1; }
grep -q "a batch is padded to its longest row (a multiple of 16, at most block_size 128), its rows of similar length" \
  "$work/chat.out" || { echo "FAILED: no word of how batches are padded"; exit 1; }

echo "== 3. the masked loss against numpy"
folio_loss=$("$folio" eval --checkpoint "$work/chat" --data "$work/chat.jsonl" --split all --json |
  "$python" -c 'import json, sys; r = json.load(sys.stdin); print(r["loss"], r["tokens"])')
numpy_loss=$("$python" "$here/tests/chat_loss_numpy.py" "$work/chat" "$work/chat.jsonl")
broken=$("$python" "$here/tests/chat_loss_numpy.py" "$work/chat" "$work/chat.jsonl" --count-user)
echo "folio: $folio_loss  numpy: $numpy_loss  numpy counting the user's tokens: $broken"
"$python" - "$folio_loss" "$numpy_loss" "$broken" <<'PY'
import sys
f, n, b = (s.split() for s in sys.argv[1:4])
assert f[1] == n[1], f"folio counted {f[1]} assistant targets, numpy {n[1]}"
assert abs(float(f[0]) - float(n[0])) < 1e-4, f"folio's loss {f[0]} is not numpy's {n[0]}"
assert abs(float(f[0]) - float(b[0])) > 0.1, f"the loss with user tokens counted ({b[0]}) is folio's: the check proves nothing"
PY

# Without --data: the run's conversations, split as it split them.
"$folio" eval --checkpoint "$work/chat" | grep -q "chat.jsonl, val split: 12 conversations" ||
  { echo "FAILED: folio eval without --data"; "$folio" eval --checkpoint "$work/chat"; exit 1; }

echo "== 4. exact resume in the middle of a chat fine-tune"
"$folio" train --init-from "$work/base" --data "$work/chat.jsonl" "${run[@]}" --max-iters 10 --out "$work/cut" >/dev/null
"$folio" train --resume --max-iters 20 --out "$work/cut" --threads 1 --quiet >/dev/null
"$python" "$here/tests/compare_weights.py" "$work/chat" "$work/cut" 0
# Epoch sampling (batches of mixed lengths, each padded to its longest row) too.
"$folio" train --init-from "$work/base" --data "$work/chat.jsonl" "${run[@]}" --sampling epoch --max-iters 20 \
  --out "$work/epoch" >/dev/null
"$folio" train --init-from "$work/base" --data "$work/chat.jsonl" "${run[@]}" --sampling epoch --max-iters 10 \
  --out "$work/epoch-cut" >/dev/null
"$folio" train --resume --max-iters 20 --out "$work/epoch-cut" --threads 1 --quiet >/dev/null
"$python" "$here/tests/compare_weights.py" "$work/epoch" "$work/epoch-cut" 0

echo "== 5. folio chat"
printf 'Copy: ab\n/reset\nWhat is 2 + 2?\n' |
  "$folio" chat --checkpoint "$work/chat" --greedy --max-new-tokens 12 >"$work/replies" 2>"$work/chat-cmd.err"
[ "$(wc -l <"$work/replies")" -eq 2 ] || { echo "FAILED: not one reply a line"; cat "$work/replies"; exit 1; }
[ ! -s "$work/chat-cmd.err" ] || { echo "FAILED: notices on a chat model"; cat "$work/chat-cmd.err"; exit 1; }
# Turns of 40 characters: the third no longer fits the context of 128 with the first two.
for _ in 1 2 3 4; do echo "Copy: abcdefghijklmnopqrstuvwxyzabcdefgh"; done |
  "$folio" chat --checkpoint "$work/chat" --greedy --max-new-tokens 12 >"$work/long-replies" 2>"$work/long.err"
[ "$(wc -l <"$work/long-replies")" -eq 4 ] || { echo "FAILED: long turns: not 4 replies"; exit 1; }
grep -q "dropped the oldest turn" "$work/long.err" || { echo "FAILED: no notice of dropped turns"; cat "$work/long.err"; exit 1; }
# A turn the model cannot take (a character outside its vocabulary, or longer than its
# context alone) is left out with a notice, and the conversation before it is kept: the
# replies are those without that turn, and the third turn of 25 characters still drops
# the first, as it does without it (two fit the room a reply of 12 tokens leaves in the
# context of 128, three do not), which a conversation started over would not.
turn="Copy: abcdefghijklmnopqrs"
printf '%s\n%s\n%s\n' "$turn" "$turn" "$turn" |
  "$folio" chat --checkpoint "$work/chat" --greedy --max-new-tokens 12 >"$work/kept" 2>/dev/null
for bad in 'Copy: <a|b>' "$(printf 'Copy: %0200d' 0)"; do
  printf '%s\n%s\n%s\n%s\n' "$turn" "$turn" "$bad" "$turn" |
    "$folio" chat --checkpoint "$work/chat" --greedy --max-new-tokens 12 >"$work/refused" 2>"$work/refused.err"
  grep -q "the turn is left out; the conversation before it is kept" "$work/refused.err" ||
    { echo "FAILED: no notice of the refused turn '${bad:0:20}'"; cat "$work/refused.err"; exit 1; }
  grep -q "dropped the oldest turn" "$work/refused.err" ||
    { echo "FAILED: the turn '${bad:0:20}' started the conversation over"; cat "$work/refused.err"; exit 1; }
  # The character is placed in the turn as typed, not in the template around it.
  [ "${bad:6:1}" != "<" ] || grep -qF "the turn cannot be encoded: [tokenizer] character '<' (U+003C) at position 6 " \
    "$work/refused.err" || { echo "FAILED: the refused '<' is not placed in its turn"; cat "$work/refused.err"; exit 1; }
  # Its reply's line is empty (a script reading a reply a turn keeps its place), and the
  # others are the replies without it.
  [ "$(wc -l <"$work/refused")" -eq 4 ] && [ -z "$(sed -n 3p "$work/refused")" ] ||
    { echo "FAILED: the refused turn '${bad:0:20}' has no empty line of its own"; cat "$work/refused"; exit 1; }
  sed 3d "$work/refused" | cmp -s "$work/kept" - ||
    { echo "FAILED: a refused turn '${bad:0:20}' changed the replies"; sed 3d "$work/refused" | diff "$work/kept" -; exit 1; }
done
printf 'Hello\n' | "$folio" chat --checkpoint "$work/base" --greedy --max-new-tokens 5 >"$work/base-replies" 2>"$work/base.err"
grep -q "is a base model, without a chat template" "$work/base.err" || { echo "FAILED: no word of the plain template"; exit 1; }
[ "$(wc -l <"$work/base-replies")" -eq 1 ] || { echo "FAILED: base: not one reply"; exit 1; }

# folio report on a chat run: its samples are a user's message through the template and
# the reply folio chat gives, ended at the turn's end.
# Its 20 steps leave a model whose replies may all be empty (<|im_end|> is the commonest
# target), and a task's answer may not be: these checks take one fine-tuned 30 steps to
# copy one word.
for _ in $(seq 60); do echo '{"messages":[{"role":"user","content":"Copy: ab"},{"role":"assistant","content":"ab"}]}'; done \
  >"$work/talk.jsonl"
"$folio" train --init-from "$work/base" --data "$work/talk.jsonl" "${run[@]}" --max-iters 30 --lr-decay-iters 30 \
  --out "$work/talk" >/dev/null
prompt="Copy: ab"
said=$(printf '%s\n' "$prompt" | "$folio" chat --checkpoint "$work/talk" --greedy --max-new-tokens 12)
[ -n "$said" ] || { echo "FAILED: the model fine-tuned to copy gives an empty reply"; exit 1; }
"$folio" report --checkpoint "$work/talk" --prompt "$prompt" --sample-tokens 12 >/dev/null
reported=$(sed -n 's/^Assistant: //p' "$work/talk/report.md")
grep -qF "User: $prompt" "$work/talk/report.md" || { echo "FAILED: the report's sample is not a user's turn"; exit 1; }
[ "$reported" = "$said" ] || { echo "FAILED: the report's reply '$reported', folio chat's '$said'"; exit 1; }

# A generative task on a chat model goes through its template too: an item whose
# answer is folio chat's reply scores 1.
printf '{"prompt": "%s", "answer": "%s"}\n' "$prompt" "$said" >"$work/gen.jsonl"
"$folio" eval --checkpoint "$work/talk" --task "$work/gen.jsonl" --max-new-tokens 12 --json >"$work/gen.json"
grep -q '"exact_match":1\.0,' "$work/gen.json" || { echo "FAILED: the task's reply is not folio chat's"; cat "$work/gen.json"; exit 1; }

echo "== 6. two ranks train as one process"
if command -v mpirun >/dev/null; then
  # Under AddressSanitizer, Open MPI's own allocations at init would show as leaks.
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    mpirun --allow-run-as-root --oversubscribe -x ASAN_OPTIONS -np 2 "$folio" train --init-from "$work/base" --data "$work/chat.jsonl" \
    "${run[@]}" --batch-size 5 --max-iters 20 --out "$work/two" >/dev/null
  "$folio" train --init-from "$work/base" --data "$work/chat.jsonl" "${run[@]}" --batch-size 5 --max-iters 20 \
    --out "$work/one" >/dev/null
  "$python" "$here/tests/compare_weights.py" "$work/one" "$work/two" 1e-4
else
  echo "skipped: no mpirun"
fi
echo "== 7. /v1/chat/completions and folio chat agree"
source "$here/scripts/serve-on-free-port.sh"
serve_on_free_port "$work/serve.log" --checkpoint "$work/chat" --threads 1 || { echo "FAILED: folio serve did not start"; exit 1; }
for turn in "Copy: ab" "What is 2 + 2?"; do
  body=$("$python" -c 'import json, sys; print(json.dumps({"messages": [{"role": "user", "content": sys.argv[1]}],
                                                            "temperature": 0, "max_tokens": 12}))' "$turn")
  curl -sf "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" >"$work/reply.json"
  printf '%s\n' "$turn" | "$folio" chat --checkpoint "$work/chat" --greedy --max-new-tokens 12 >"$work/chat-reply"
  PYTHONPATH="$(dirname "$folio")/python" "$python" - "$work/reply.json" "$work/chat-reply" "$work/chat" "$turn" <<'PY'
import json, sys
choice = json.load(open(sys.argv[1]))["choices"][0]
served = choice["message"]["content"].replace("\n", "\\n")
said = open(sys.argv[2]).read().rstrip("\n")
assert served == said, f"served {served!r}, folio chat said {said!r}"
assert choice["finish_reason"] in ("stop", "length"), choice
try:
    import folio
except ImportError:
    print(f"agree: {said!r} ({choice['finish_reason']}); no Python module beside the binary")
    sys.exit(0)
reply = folio.load(sys.argv[3]).chat([{"role": "user", "content": sys.argv[4]}], greedy=True, max_new_tokens=12)
assert reply.replace("\n", "\\n") == said, f"model.chat said {reply!r}, folio chat {said!r}"
print(f"agree, model.chat too: {said!r} ({choice['finish_reason']})")
PY
done
kill "$server"; wait "$server" 2>/dev/null || true; server=""
echo "all chat checks passed"
