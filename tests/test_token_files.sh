#!/usr/bin/env bash
# Token directories against implementations no one here wrote, and training on them:
#  1. folio tokenize's shards read by numpy from llm.c's published layout (a header of
#     256 int32: 20240520, 1, the count; then uint16), its documents found again by a
#     Python walk with the documented split rule, and every document's ids equal to
#     SentencePiece's own Python encoding with the manifest's model;
#  2. llm.c shards and nanoGPT train.bin/val.bin written by numpy train in folio
#     (with --vocab-size), and without it the error says so and nothing is written;
#  3. on a token directory, 30 steps and a resume to 60 end bit for bit where 60
#     straight steps end (epoch sampling), and a re-tokenized directory is refused
#     on --resume;
#  4. two MPI ranks on a token directory give a single process's weights;
#  5. a tokenize refused for its input (exit 2) leaves nothing, and a directory an
#     interrupted one leaves (its marker) is refused by folio train.
#   test_token_files.sh FOLIO_BINARY        (exit 77: no numpy or python3-sentencepiece)
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
python=/usr/bin/python3
"$python" -c "import numpy, sentencepiece" 2>/dev/null || { echo "skipped: $python lacks numpy or sentencepiece"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-tokens.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

echo "== 1. folio tokenize, read back by numpy and SentencePiece"
mkdir -p "$work/docs/plays/early" "$work/docs/.hidden"
for i in $(seq 0 29); do  # 30 documents of 2 KB from the corpus, in two directories
  dir=$([ $((i % 3)) -eq 0 ] && echo plays/early || echo plays)
  head -c $(((i + 1) * 2000)) "$here/data/tinyshakespeare.txt" | tail -c 2000 >"$work/docs/$dir/act$i.txt"
done
printf 'caf\xc3\xa9 \xe2\x82\xac, \xf0\x9f\x99\x82 and tabs\t\n' >"$work/docs/plays/unicode.txt"
echo "not included" >"$work/docs/plays/notes.md"
echo "hidden" >"$work/docs/.hidden/act99.txt"
"$folio" tokenize "$work/docs" --include '*.txt' --out "$work/tok" --tokenizer bpe --vocab-size 400 \
  --val-fraction 0.25 --shard-tokens 3000 >"$work/tokenize.out"
cat "$work/tokenize.out"
"$python" - "$work/tok" "$work/docs" <<'EOF'
import base64, json, os, sys
import numpy as np
import sentencepiece as spm

tok, docs = sys.argv[1], sys.argv[2]
m = json.load(open(os.path.join(tok, "manifest.json")))
eot = m["end_of_text"]

def read_shard(path):  # llm.c's layout, from its documentation
    header = np.fromfile(path, dtype="<i4", count=256)
    assert header[0] == 20240520 and header[1] == 1, f"{path}: header {header[:3]}"
    assert not header[3:].any(), "header words past the third must be 0"
    tokens = np.fromfile(path, dtype="<u2", offset=1024)
    assert len(tokens) == header[2], f"{path}: {len(tokens)} tokens, header says {header[2]}"
    assert os.path.getsize(path) == 1024 + 2 * header[2]
    return tokens

M = 0xFFFFFFFFFFFFFFFF
def split_hash(s):  # the manifest's val_rule: splitmix64's finaliser of FNV-1a 64
    h = 0xcbf29ce484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001b3) & M
    h ^= h >> 30; h = (h * 0xbf58476d1ce4e5b9) & M
    h ^= h >> 27; h = (h * 0x94d049bb133111eb) & M
    return h ^ (h >> 31)

names = []
for root, dirs, files in os.walk(docs):
    dirs[:] = [d for d in dirs if not d.startswith(".")]
    names += [os.path.relpath(os.path.join(root, f), docs) for f in files if f.endswith(".txt") and not f.startswith(".")]
names.sort(key=lambda n: n.encode())
expected = {"train": [], "val": []}
for n in names:
    split = "val" if (split_hash(n) >> 44) < m["val_fraction"] * 2**20 else "train"
    expected[split].append(open(os.path.join(docs, n), "rb").read().decode())

sp = spm.SentencePieceProcessor()
sp.LoadFromSerializedProto(base64.b64decode(m["tokenizer"]["tokenizer_model"]))
assert sp.eos_id() == eot, (sp.eos_id(), eot)
for split in ("train", "val"):
    shards = m["splits"][split]["shards"]
    assert [s["file"] for s in shards] == [f"{split}_{i:06d}.bin" for i in range(len(shards))]
    ids = np.concatenate([read_shard(os.path.join(tok, s["file"])) for s in shards]).tolist()
    assert ids[0] == eot
    got, cur = [], None
    for t in ids:
        if t == eot:
            cur = []
            got.append(cur)
        else:
            cur.append(t)
    want = expected[split]
    assert len(got) == len(want) == m["splits"][split]["documents"], (split, len(got), len(want))
    for g, w in zip(got, want):
        assert g == sp.encode(w), f"{split}: ids differ from SentencePiece's for {w[:40]!r}"
        assert sp.decode(g) == w
    assert m["splits"][split]["bytes"] == sum(len(w.encode()) for w in want)
    print(f"{split}: {len(got)} documents, {len(ids)} tokens in {len(shards)} shards, as numpy and SentencePiece read them")
EOF

echo "== 2. llm.c and nanoGPT token files train in folio"
"$python" - "$work" <<'EOF'
import os, sys
import numpy as np
work = sys.argv[1]
rng = np.random.default_rng(0)
os.makedirs(f"{work}/llmc"); os.makedirs(f"{work}/nano")
def shard(path, tokens):  # llm.c's dev/data/data_common.py layout
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes()); f.write(np.asarray(tokens, dtype="<u2").tobytes())
pattern = np.arange(4000) % 300  # a sequence a model can learn
shard(f"{work}/llmc/tiny_val_000000.bin", pattern[:1000])
shard(f"{work}/llmc/tiny_train_000001.bin", pattern[1000:2500])
shard(f"{work}/llmc/tiny_train_000002.bin", pattern[2500:])
pattern[:3000].astype("<u2").tofile(f"{work}/nano/train.bin")
pattern[3000:].astype("<u2").tofile(f"{work}/nano/val.bin")
EOF
small=(--n-layer 1 --n-head 2 --n-embd 32 --block-size 16 --batch-size 8 --eval-iters 2 --eval-interval 20 --quiet
       --warmup-iters 5)
if "$folio" train --data "$work/llmc" --out "$work/run-novocab" "${small[@]}" 2>"$work/novocab.err"; then
  fail "llm.c shards without --vocab-size were accepted"
fi
grep -q -- "--vocab-size" "$work/novocab.err" || { cat "$work/novocab.err"; fail "the error does not name --vocab-size"; }
[ ! -e "$work/run-novocab" ] || fail "a refused run wrote $work/run-novocab"
for layout in llmc nano; do
  "$folio" train --data "$work/$layout" --vocab-size 300 --out "$work/run-$layout" --max-iters 40 "${small[@]}"
  "$folio" eval --checkpoint "$work/run-$layout" --json >"$work/eval-$layout.json"
  "$python" -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['bits_per_byte'] is None and r['loss'] < 5.7, r; print(sys.argv[2], 'val loss', round(r['loss'], 3))" \
    "$work/eval-$layout.json" "$layout"
done

echo "== 3. exact resume on a token directory, and a changed one refused"
head -c 60000 "$here/data/tinyshakespeare.txt" >"$work/text.txt"
"$folio" tokenize "$work/text.txt" --out "$work/chars" --tokenizer char >/dev/null
run=(--data "$work/chars" "${small[@]}" --sampling epoch --warmup-iters 5 --lr-decay-iters 60)
"$folio" train "${run[@]}" --max-iters 60 --out "$work/straight"
"$folio" train "${run[@]}" --max-iters 30 --out "$work/cut"
"$folio" train --resume --max-iters 60 --out "$work/cut" --quiet
cmp "$work/straight/model.safetensors" "$work/cut/model.safetensors" || fail "30 + 30 steps differ from 60"
echo "30 + 30 steps equal 60, bit for bit"
"$folio" tokenize "$work/text.txt" --out "$work/chars" --tokenizer char --val-fraction 0.2 --overwrite >/dev/null
if "$folio" train --resume --max-iters 90 --out "$work/cut" --quiet 2>"$work/changed.err"; then
  fail "resumed on a re-tokenized directory"
fi
grep -q "not the ones this run trained on" "$work/changed.err" || { cat "$work/changed.err"; fail "unclear error"; }
echo "a re-tokenized directory is refused on --resume"

echo "== 4. two MPI ranks on a token directory"
if command -v mpirun >/dev/null; then
  mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
  ranks=(--data "$work/tok" --n-layer 1 --n-head 2 --n-embd 32 --block-size 16 --batch-size 5 --eval-iters 2
         --eval-interval 10 --dropout 0 --threads 1 --quiet --sampling epoch --max-iters 20 --warmup-iters 5)
  "$folio" train "${ranks[@]}" --out "$work/one"
  "${mpi[@]}" "$folio" train "${ranks[@]}" --out "$work/two"
  "$python" "$here/tests/compare_weights.py" "$work/one" "$work/two" 1e-4
else
  echo "skipped: no mpirun"
fi

echo "== 5. a tokenize refused for its input leaves nothing; an unfinished directory is refused"
status=0
"$folio" tokenize "$work/docs" --out "$work/broken" --tokenizer bpe --vocab-size 60000 >/dev/null 2>"$work/broken.err" || status=$?
[ "$status" = 2 ] || { cat "$work/broken.err"; fail "60000 pieces from 60 KB of text: exit $status, not 2 (bad input)"; }
[ ! -e "$work/broken" ] || fail "the refused tokenize left $work/broken behind"
# A killed tokenize leaves its marker on purpose: a copy of a finished directory with it.
cp -r "$work/tok" "$work/unfinished"
touch "$work/unfinished/.tokenize-incomplete"
if "$folio" train --data "$work/unfinished" --out "$work/run-broken" --quiet 2>"$work/broken-train.err"; then
  fail "trained on an unfinished token directory"
fi
grep -q "did not finish" "$work/broken-train.err" || { cat "$work/broken-train.err"; fail "unclear error"; }
echo "refused: $(head -n 1 "$work/broken-train.err")"
echo "all passed"
