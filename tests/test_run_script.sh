#!/usr/bin/env bash
# scripts/run.sh never replaces a run: run twice, in a copy of the repository's layout
# (its set-up and build stubbed, build/folio the binary under test), the second run
# goes to runs/shakespeare-3min-2, says so, and the first run is left exactly as it was.
#   test_run_script.sh FOLIO_BINARY
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-runsh.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

mkdir -p "$work/scripts" "$work/build" "$work/configs" "$work/data"
cp "$here/scripts/run.sh" "$work/scripts/"
printf '#!/usr/bin/env bash\n' >"$work/scripts/setup.sh"
printf '#!/usr/bin/env bash\n' >"$work/scripts/build.sh"
ln -s "$(readlink -f "$folio")" "$work/build/folio"
cp "$here/configs/shakespeare-3min.ini" "$work/configs/"
head -c 20000 "$here/data/tinyshakespeare.txt" >"$work/data/tinyshakespeare.txt"
short=(--max-iters 2 --eval-interval 2 --eval-iters 1 --warmup-iters 1 --seq-warmup 0 --threads 2 --quiet)

bash "$work/scripts/run.sh" "${short[@]}" >"$work/first.log" 2>&1 || { cat "$work/first.log"; fail "the first run.sh"; }
first=$work/runs/shakespeare-3min
[ -f "$first/model.safetensors" ] || fail "no run in $first: $(cat "$work/first.log")"
grep -q "training into runs/shakespeare-3min$" "$work/first.log" || fail "run.sh did not say where: $(cat "$work/first.log")"
touch "$first/notes.txt"  # what a user adds to a run they keep
before=$(cd "$first" && find . -printf '%p %s %T@ %i\n' | sort)

bash "$work/scripts/run.sh" "${short[@]}" >"$work/second.log" 2>&1 || { cat "$work/second.log"; fail "the second run.sh"; }
[ -f "$work/runs/shakespeare-3min-2/model.safetensors" ] || fail "the second run is not in runs/shakespeare-3min-2"
grep -q "training into runs/shakespeare-3min-2$" "$work/second.log" || fail "run.sh did not say where: $(cat "$work/second.log")"
after=$(cd "$first" && find . -printf '%p %s %T@ %i\n' | sort)
[ "$before" = "$after" ] || fail "the second run.sh changed the first run:
$(diff <(echo "$before") <(echo "$after"))"
echo "run.sh twice: runs/shakespeare-3min kept as it was, the second run in runs/shakespeare-3min-2"
