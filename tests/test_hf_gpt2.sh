#!/usr/bin/env bash
# HF's GPT-2 layout in and out. tests/hf_gpt2_reference.py (numpy alone, from the
# published key names, shapes and equations) writes a random 2-layer GPT-2 directory;
# folio import --from-hf reads it, and
#   - folio eval's loss equals the numpy forward's on the same text, to 1e-5;
#   - scripts/folio_numpy.py's logits of the imported checkpoint (folio's layout) equal
#     the reference's (HF's layout), to 1e-9: every tensor landed where it belongs;
#   - folio export --format hf writes the same tensors back, bit for bit, and importing
#     that gives the same checkpoint; so does the directory with unprefixed names;
#   - an n_inner other than 4 x n_embd is --ffn-hidden, with the reference's loss;
#   - folio train --init-from starts at the import's folio eval loss, the loss falls, and
#     a resumed fine-tuning ends bit for bit where an uninterrupted one does;
#   - bad directories are refused with exit 2, naming what is wrong, and a model
#     GPT-2 cannot hold is refused by export, naming the flag.
#   test_hf_gpt2.sh FOLIO_BINARY
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
python=/usr/bin/python3  # Debian's, where python3-numpy installs (scripts/setup.sh)
"$python" -c "import numpy" 2>/dev/null || { echo "skipped: $python has no numpy"; exit 77; }
ref="$here/tests/hf_gpt2_reference.py"
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-hf.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }

refused() {  # refused DIR FRAGMENT...
  local dir=$1 out status=0
  shift
  out=$("$folio" import "$work/bad-run" --from-hf "$dir" 2>&1) || status=$?
  [ "$status" = 2 ] || fail "import of $dir exited $status, not 2: $out"
  for fragment in "$@"; do
    [[ "$out" == *"$fragment"* ]] || fail "import of $dir: no '$fragment' in: $out"
  done
  [ ! -e "$work/bad-run" ] || fail "a refused import wrote $work/bad-run"
  echo "refused: $out"
}
mkdir "$work/hf"
"$python" "$ref" write "$work/hf"
"$folio" import "$work/run" --from-hf "$work/hf"
# 3,300 bytes (no merge of the reference vocabulary occurs in them: a token a byte);
# --val-fraction 0.01 leaves 33 for val: one window of n_positions 32 and its targets.
head -c 3300 "$here/data/tinyshakespeare.txt" >"$work/corpus.txt"

# The loss over the whole text, from folio and from the reference.
ours=$("$folio" eval --checkpoint "$work/run" --data "$work/corpus.txt" --split all --json --threads 1 |
  "$python" -c 'import json, sys; print(json.load(sys.stdin)["loss"])')
theirs=$("$python" "$ref" loss "$work/hf" "$work/corpus.txt" | awk '{print $2}')
echo "loss: folio eval $ours, numpy GPT-2 $theirs"
near "$ours" "$theirs" 1e-5 || fail "folio eval's loss $ours is not the reference's $theirs"

# An n_inner that is not 4 x n_embd is --ffn-hidden: the same loss, and export writes it back.
mkdir "$work/inner"
"$python" "$ref" write-inner "$work/inner"
"$folio" import "$work/run-inner" --from-hf "$work/inner"
"$folio" info --checkpoint "$work/run-inner" | grep -q -- "--ffn-hidden 24" || fail "n_inner 24 is not --ffn-hidden 24"
ours=$("$folio" eval --checkpoint "$work/run-inner" --data "$work/corpus.txt" --split all --json --threads 1 |
  "$python" -c 'import json, sys; print(json.load(sys.stdin)["loss"])')
theirs=$("$python" "$ref" loss "$work/inner" "$work/corpus.txt" | awk '{print $2}')
echo "n_inner 24: folio eval $ours, numpy GPT-2 $theirs"
near "$ours" "$theirs" 1e-5 || fail "with n_inner 24, folio eval's loss $ours is not the reference's $theirs"
"$folio" export --format hf "$work/run-inner" "$work/inner-out"
grep -q '"n_inner": *24' "$work/inner-out/config.json" || fail "export did not write n_inner 24"

# Logits of one sequence: HF's layout (the reference) against folio's (the import).
ids=5,71,3,200,17,99,0,42,256,12
"$python" "$ref" logits "$work/hf" "$ids" "$work/ref.npy"
PYTHONPATH="$here/scripts" "$python" - "$work/run" "$ids" "$work/ref.npy" <<'EOF'
import sys
import numpy as np
import folio_numpy
W, config, _ = folio_numpy.load(sys.argv[1])
ids = np.array([[int(t) for t in sys.argv[2].split(",")]])
ours, ref = folio_numpy.forward(W, config, ids)[0], np.load(sys.argv[3])
worst = float(abs(ours - ref).max())
print(f"logits: largest difference {worst:.3g} over {ref.size} (largest logit {float(abs(ref).max()):.3g})")
sys.exit(0 if worst <= 1e-9 else 1)
EOF

# Export and import again: the same tensors, bit for bit, both ways.
"$folio" export --format hf "$work/run" "$work/out"
"$python" - "$work/hf" "$work/out" "$ref" <<'EOF'
import importlib.util, sys
import numpy as np
spec = importlib.util.spec_from_file_location("ref", sys.argv[3])
ref = importlib.util.module_from_spec(spec); spec.loader.exec_module(ref)
a, b = ref.load_safetensors(sys.argv[1] + "/model.safetensors"), ref.load_safetensors(sys.argv[2] + "/model.safetensors")
a = {k: v for k, v in a.items() if not k.endswith(".attn.bias")}  # the mask buffer is not a weight
assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
for k in a:
    assert a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes(), k
import json
read = lambda d, name: open(f"{d}/{name}", encoding="utf-8").read()
assert json.loads(read(sys.argv[1], "vocab.json")) == json.loads(read(sys.argv[2], "vocab.json")), "vocab.json"
assert read(sys.argv[1], "merges.txt").splitlines() == read(sys.argv[2], "merges.txt").splitlines(), "merges.txt"
print(f"export: {len(a)} tensors bit-exact, the same vocab.json and merges.txt")
EOF
"$folio" import "$work/run2" --from-hf "$work/out"
"$python" "$here/tests/compare_weights.py" "$work/run" "$work/run2"
# The same tensors named without "transformer." and with 0-d masked_bias buffers: the same model.
mkdir "$work/bare"
"$python" "$ref" write-bare "$work/bare"
"$folio" import "$work/run-bare" --from-hf "$work/bare"
"$python" "$here/tests/compare_weights.py" "$work/run" "$work/run-bare"
# An lm_head.weight that is not wte: an untied output layer, which export writes back.
cp -r "$work/hf" "$work/untied"
"$python" - "$work/untied" "$ref" <<'EOF'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("ref", sys.argv[2])
ref = importlib.util.module_from_spec(spec); spec.loader.exec_module(ref)
W = ref.load_safetensors(sys.argv[1] + "/model.safetensors")
ref.save_safetensors(sys.argv[1] + "/model.safetensors", dict(W, **{"lm_head.weight": -0.5 * W["transformer.wte.weight"]}))
EOF
refused "$work/untied" lm_head.weight differs wte tie_word_embeddings
sed -i 's/"vocab_size": 260/"vocab_size": 260, "tie_word_embeddings": false/' "$work/untied/config.json"
"$folio" import "$work/run-untied" --from-hf "$work/untied"
"$folio" info --checkpoint "$work/run-untied" | grep options | grep -vq -- --tie-weights || fail "the untied import is tied"
"$folio" export --format hf "$work/run-untied" "$work/untied-out"
"$python" - "$work/untied" "$work/untied-out" "$ref" <<'EOF'
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("ref", sys.argv[3])
ref = importlib.util.module_from_spec(spec); spec.loader.exec_module(ref)
a, b = (ref.load_safetensors(d + "/model.safetensors")["lm_head.weight"] for d in sys.argv[1:3])
assert a.tobytes() == b.tobytes(), "lm_head.weight"
assert json.load(open(sys.argv[2] + "/config.json"))["tie_word_embeddings"] is False
print("untied: lm_head.weight back bit for bit, tie_word_embeddings false")
EOF

# Fine-tuning: the first evaluation of the one val window is folio eval's of the import.
before=$("$folio" eval --checkpoint "$work/run" --data "$work/corpus.txt" --val-fraction 0.01 --json --threads 1 |
  "$python" -c 'import json, sys; print(json.load(sys.stdin)["loss"])')
"$folio" train --init-from "$work/run" --data "$work/corpus.txt" --val-fraction 0.01 --out "$work/tuned" \
  --batch-size 4 --max-iters 30 --eval-interval 15 --eval-iters 1 --lr 1e-2 --warmup-iters 0 --threads 1 \
  >"$work/train.log" 2>&1 || { cat "$work/train.log"; fail "folio train --init-from"; }
grep "val loss" "$work/train.log"
first=$(grep -m1 -o 'val loss [0-9.]*' "$work/train.log" | awk '{print $3}')
last=$(grep -o 'val loss [0-9.]*' "$work/train.log" | tail -n 1 | awk '{print $3}')
near "$first" "$before" 1e-4 || fail "the first val loss $first is not folio eval's $before"
awk -v a="$last" -v b="$first" 'BEGIN { exit !(a < b - 0.1) }' || fail "the val loss did not fall: $first -> $last"
# Resume is exact: 15 steps, then a resume to 30, end where 30 straight steps do (one
# cosine for both).
tune=(--init-from "$work/run" --data "$work/corpus.txt" --val-fraction 0.01 --batch-size 4 --eval-interval 15
      --eval-iters 1 --lr 1e-2 --warmup-iters 0 --lr-decay-iters 30 --threads 1 --quiet)
"$folio" train "${tune[@]}" --max-iters 30 --out "$work/straight"
"$folio" train "${tune[@]}" --max-iters 15 --out "$work/cut"
"$folio" train --resume --max-iters 30 --out "$work/cut" --quiet
"$python" "$here/tests/compare_weights.py" "$work/straight" "$work/cut" || fail "the resumed fine-tuning differs"

# Bad directories: exit 2 and the name of what is wrong.
variant() { rm -rf "$work/v"; cp -r "$work/hf" "$work/v"; }
variant; rm "$work/v/model.safetensors"; touch "$work/v/pytorch_model.bin"
refused "$work/v" model.safetensors pytorch_model.bin safetensors
variant; rm "$work/v/merges.txt"
refused "$work/v" merges.txt missing
variant; sed -i 's/"model_type": "gpt2"/"model_type": "llama"/' "$work/v/config.json"
refused "$work/v" config.json model_type llama
variant; sed -i 's/"gelu_new"/"relu"/' "$work/v/config.json"
refused "$work/v" activation_function relu
variant; sed -i 's/"n_layer": 2/"n_layer": 2, "rotary_dim": 8/' "$work/v/config.json"
refused "$work/v" rotary_dim
variant; sed -i 's/"n_embd": 16/"n_embd": 32/' "$work/v/config.json"
refused "$work/v" wte.weight shape "(260, 16)" "(260, 32)"
variant; sed -i 's/"n_layer": 2/"n_layer": 3/' "$work/v/config.json"
refused "$work/v" h.2.ln_1.weight missing
variant; sed -i 's/"vocab_size": 260/"vocab_size": 261/' "$work/v/config.json"
refused "$work/v" vocab.json 260 261
variant; printf '#version: 0.2\nq z\nz q\n' >"$work/v/merges.txt"
refused "$work/v" merges.txt '"z q"' "belong together"
variant; sed -i 's/"vocab_size": 260/"vocab_size": 260, "tie_word_embeddings": false/' "$work/v/config.json"
refused "$work/v" lm_head.weight missing tie_word_embeddings
# What GPT2LMHeadModel cannot hold is refused by export, naming the flag.
"$folio" train --data "$work/corpus.txt" --out "$work/rope" --n-layer 1 --n-embd 16 --n-head 2 --block-size 16 \
  --pos rope --max-iters 1 --eval-iters 1 --quiet --threads 1
status=0
out=$("$folio" export --format hf "$work/rope" "$work/rope-hf" 2>&1) || status=$?
[ "$status" = 2 ] && [[ "$out" == *"--pos rope"* ]] && [[ "$out" == *"--gpt2-biases"* ]] ||
  fail "export of a rope model: exit $status, $out"
echo "refused: $out"
echo "HF GPT-2 layout: import, logits, export, fine-tuning and refusals as expected"
