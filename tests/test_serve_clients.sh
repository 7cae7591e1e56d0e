#!/usr/bin/env bash
# folio serve against real clients: curl reads the raw Server-Sent Events, the official
# openai npm client (v4) makes a completion, a streamed one, a chat completion, a
# streamed one, and an authenticated call,
# and SIGTERM in the middle of a stream ends it with [DONE] and the server with exit 0.
# Then on a chat model (a tiny one fine-tuned here): the client's chat completion, whole
# and streamed, is folio chat's greedy reply, ends at the turn's end, shows no marker.
# The npm part is skipped (exit 77) where node or npm is absent.
#   test_serve_clients.sh FOLIO_BINARY
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/serve-on-free-port.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-serve-clients.XXXXXX")
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAILED: $*" >&2; [ -f "$work/serve.log" ] && cat "$work/serve.log" >&2; exit 1; }

head -c 20000 "$here/data/tinyshakespeare.txt" >"$work/corpus.txt"
# A context of 64: the client's chat (a system and a user message through the plain
# template, about 50 tokens) must fit it with room for the reply, or it is refused.
"$folio" train --data "$work/corpus.txt" --out "$work/run" --n-layer 1 --n-head 2 --n-embd 16 --block-size 64 \
  --batch-size 4 --max-iters 10 --eval-interval 10 --eval-iters 2 --quiet --threads 1
echo "k3y-$RANDOM" >"$work/key"
key=$(cat "$work/key")

# Starts folio serve on a free port; sets $server and $base.
start() {
  serve_on_free_port "$work/serve.log" --checkpoint "${checkpoint:-$work/run}" --threads 1 "$@" ||
    fail "folio serve did not start"
  base="http://127.0.0.1:$port"
}

start --api-key-file "$work/key" --max-tokens 100000 --shutdown-grace 1
[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] || fail "/health"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/v1/models")" = 401 ] || fail "no key: not 401"

# A second server on the same port is refused (exit 2), and never shares its traffic.
code=0
timeout 20 "$folio" serve --checkpoint "$work/run" --port "$port" --threads 1 >"$work/second.log" 2>&1 || code=$?
[ "$code" = 2 ] || fail "a second server on port $port: exit $code, expected 2: $(cat "$work/second.log")"
grep -q "port in use" "$work/second.log" || fail "the second server's message: $(cat "$work/second.log")"
[ "$(ss -Htln "sport = :$port" 2>/dev/null | wc -l)" -le 1 ] || fail "two listeners on port $port"
# The model is the run's name, from the directory or any of its weights files.
models() { curl -s -H "Authorization: Bearer $key" "$base/v1/models"; }
python3 -c 'import json,sys; m=json.load(sys.stdin)["data"][0]; assert m["id"] == "run" and m["created"] > 1.6e9, m' \
  <<<"$(models)" || fail "/v1/models: $(models)"
# One access-log line per request on stderr.
grep -q '^folio serve: GET /v1/models 200 tokens=- ms=' "$work/serve.log" || fail "no access log: $(cat "$work/serve.log")"

# Raw SSE: text/event-stream, data: lines of JSON chunks, then data: [DONE].
curl -sN -D "$work/headers" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
  -d '{"prompt": "ROMEO:", "max_tokens": 20, "stream": true, "seed": 3}' "$base/v1/completions" >"$work/sse"
grep -qi '^content-type: text/event-stream' "$work/headers" || fail "content type: $(cat "$work/headers")"
python3 - "$work/sse" <<'PY' || fail "SSE stream: $(cat "$work/sse")"
import json, sys
events = [e for e in open(sys.argv[1], encoding="utf-8").read().split("\n\n") if e]
data = [e[len("data: "):] for e in events if e.startswith("data: ")]
assert data[-1] == "[DONE]", data[-1]
chunks = [json.loads(d) for d in data[:-1]]
assert all(c["object"] == "text_completion" for c in chunks)
assert chunks[-1]["choices"][0]["finish_reason"] == "length" and chunks[-1]["usage"]["completion_tokens"] == 20
text = "".join(c["choices"][0]["text"] for c in chunks)
print(f"curl: {len(chunks)} chunks, {text!r}")
PY

# SIGTERM while a stream runs: the stream is cut and still ends with [DONE]; exit 0.
curl -sN -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
  -d '{"prompt": "ROMEO:", "max_tokens": 100000, "stream": true}' "$base/v1/completions" >"$work/cut" &
reader=$!
for _ in $(seq 100); do [ -s "$work/cut" ] && break; sleep 0.05; done
kill -TERM "$server"
code=0
timeout 10 tail --pid="$server" -f /dev/null || fail "folio serve did not stop within 10 s of SIGTERM"
wait "$server" || code=$?
server=""
wait "$reader" || true
[ "$code" = 0 ] || fail "folio serve exited $code after SIGTERM"
tail -c 200 "$work/cut" | grep -q 'data: \[DONE\]' || fail "the cut stream did not end with [DONE]: $(tail -c 300 "$work/cut")"
echo "SIGTERM: the stream was cut with [DONE], exit 0"

# The official client.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "skipped: the openai npm client needs node and npm, absent here (bash scripts/test.sh fetches Node 20 and npm into build/node; curl and SIGTERM checks passed)"
  exit 77
fi
npm_dir=${FOLIO_SERVE_NPM_DIR:-$work/npm}
source "$here/tests/npm_package.sh"
npm_package "$npm_dir" openai@4 "curl and SIGTERM checks passed"
# On int8 weights (--weights int8): the client sees nothing of how the matrices are stored.
checkpoint=$work/run/best.safetensors start --api-key-file "$work/key" --quiet --weights int8
[ "$(models | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')" = run ] || fail "best: $(models)"
NODE_PATH="$npm_dir/node_modules" node "$here/tests/serve_openai_client.mjs" "$base/v1" "$key" || fail "openai client"
kill -TERM "$server"
wait "$server" || fail "exit $? after SIGTERM"
server=""
! grep -q 'folio serve: [A-Z]* /' "$work/serve.log" || fail "--quiet still logged requests: $(cat "$work/serve.log")"

# A chat model, fine-tuned here in a second: every conversation a system message, a
# user's line and a short reply, so that its greedy reply ends at <|im_end|>.
"$folio" train --data "$work/corpus.txt" --out "$work/base" --n-layer 1 --n-head 2 --n-embd 32 --block-size 96 \
  --batch-size 4 --max-iters 10 --eval-interval 10 --eval-iters 2 --quiet --threads 1
python3 - >"$work/chat.jsonl" <<'PY'
import json
turns = [("Speak, ROMEO.", "Yes."), ("Be still, JULIET.", "No, sir."), ("Who comes?", "A friend.")]
for i in range(60):
    user, reply = turns[i % 3]
    print(json.dumps({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": user},
                                   {"role": "assistant", "content": reply}]}))
PY
"$folio" train --init-from "$work/base" --data "$work/chat.jsonl" --out "$work/chat" --batch-size 8 --max-iters 80 \
  --lr 1e-2 --warmup-iters 5 --eval-interval 80 --eval-iters 2 --quiet --threads 1
said=$(printf 'Speak, ROMEO.\n' | "$folio" chat --checkpoint "$work/chat" --system "Be brief." --greedy --max-new-tokens 40)
checkpoint=$work/chat start --quiet
NODE_PATH="$npm_dir/node_modules" node "$here/tests/serve_openai_chat_client.mjs" "$base/v1" "Be brief." "Speak, ROMEO." \
  "$said" || fail "openai client on a chat model"
kill -TERM "$server"
wait "$server" || fail "exit $? after SIGTERM (chat model)"
server=""
