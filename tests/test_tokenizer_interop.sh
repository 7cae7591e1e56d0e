#!/usr/bin/env bash
# folio's SentencePiece tokens against Debian's own spm tools (package sentencepiece):
#  1. a BPE tokenizer folio trained, exported with `folio info --export-tokenizer`,
#     gives spm_encode the ids `folio tokens` gives, on several texts;
#  2. a model trained by spm_train, given to `folio train --tokenizer FILE.model`,
#     trains, and its checkpoint's ids equal spm_encode's with that file.
# spm_encode encodes line by line, so each text is one line.
#   test_tokenizer_interop.sh FOLIO_BINARY
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
command -v spm_encode >/dev/null && command -v spm_train >/dev/null \
  || { echo "skipped: no spm_encode/spm_train (Debian package sentencepiece)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-spm.XXXXXX")
trap 'rm -rf "$work"' EXIT
head -c 60000 "$here/data/tinyshakespeare.txt" >"$work/corpus.txt"
texts=(
  "ROMEO: But soft, what light through yonder window breaks?"
  "    int main(void) { return 0; }   // trailing spaces   "
  $'tabs\tand\tdigits 12345 and CJK \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e and emoji \xf0\x9f\x8e\x89 e\xcc\x81'
  "Zounds! QUEEN MARGARET: xylophones, quizzical jukeboxes"
)
compare() {  # compare RUN MODEL_FILE: folio tokens and spm_encode agree on every text
  for t in "${texts[@]}"; do
    ours=$("$folio" tokens --checkpoint "$1" --text "$t" --format ids)
    theirs=$(printf '%s\n' "$t" | spm_encode --model "$2" --output_format=id)
    [ "$ours" = "$theirs" ] || { printf 'FAILED on %q:\n folio: %s\n spm:   %s\n' "$t" "$ours" "$theirs" >&2; exit 1; }
  done
  echo "$1: folio tokens == spm_encode on ${#texts[@]} texts"
}
train=(--data "$work/corpus.txt" --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4
       --max-iters 4 --eval-interval 2 --eval-iters 1 --quiet --threads 1)

"$folio" train "${train[@]}" --out "$work/bpe" --tokenizer bpe --vocab-size 500
"$folio" info --checkpoint "$work/bpe" --export-tokenizer "$work/bpe.model"
compare "$work/bpe" "$work/bpe.model"

spm_train --input="$work/corpus.txt" --model_prefix="$work/debian" --vocab_size=300 --model_type=unigram \
  --minloglevel=2 >/dev/null 2>&1
"$folio" train "${train[@]}" --out "$work/debian-run" --tokenizer "$work/debian.model"
"$folio" info --checkpoint "$work/debian-run" | grep -q "spm (SentencePiece), 300 pieces" \
  || { echo "FAILED: folio info does not show the spm_train model" >&2; exit 1; }
compare "$work/debian-run" "$work/debian.model"
echo "folio's SentencePiece tokens match Debian's spm_encode"
