#!/usr/bin/env bash
# scripts/folio_numpy.py (numpy alone) reads a checkpoint and computes the same loss as
# folio eval, to 1e-4, for a ReLU and a GELU model: the safetensors file is readable by
# others, and the model in it is the model folio runs.   test_interop.sh FOLIO_BINARY
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
python=/usr/bin/python3  # Debian's, where python3-numpy installs (scripts/setup.sh)
"$python" -c "import numpy" 2>/dev/null || { echo "skipped: $python has no numpy"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-interop.XXXXXX")
trap 'rm -rf "$work"' EXIT
head -c 20000 "$here/data/tinyshakespeare.txt" >"$work/corpus.txt"
for activation in relu gelu; do
  "$folio" train --data "$work/corpus.txt" --out "$work/$activation" --n-layer 2 --n-head 2 --n-embd 16 \
    --block-size 16 --batch-size 4 --max-iters 20 --eval-interval 10 --eval-iters 2 --activation "$activation" \
    --quiet --threads 1
  for split in val train; do
    ours=$("$folio" eval --checkpoint "$work/$activation" --data "$work/corpus.txt" --split "$split" --threads 1)
    theirs=$("$python" "$here/scripts/folio_numpy.py" --checkpoint "$work/$activation" --data "$work/corpus.txt" \
      --split "$split")
    echo "$activation $split: folio: $ours"
    echo "$activation $split: numpy: $theirs"
    a=$(echo "$ours" | awk '{print $2}'); b=$(echo "$theirs" | awk '{print $2}')
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4) }' \
      || { echo "FAILED: $activation $split: |$a - $b| > 1e-4" >&2; exit 1; }
  done
done
echo "numpy's forward pass matches folio eval"
