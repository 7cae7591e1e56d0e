#!/usr/bin/env bash
# folio train on 2 MPI ranks (mpirun --oversubscribe, as on a 2-core machine):
#  1. after 30 steps its weights equal a single process's with the same global batch
#     and seed (to float rounding: the ranks' gradients are summed in another order),
#     and its evaluations report the same losses; so do a model with every model
#     option's (rope, QK-norm, ReLU², zero-init projections, soft cap, tied weights);
#  2. stopped at step 16 and resumed on 2 ranks, it ends bit-for-bit where the straight
#     run ends; resumed with nothing left to do, it says so once;
#  3. a batch smaller than the ranks is a clear error, and so is a batch-size warm-up
#     that starts below them;
#  4. a rank killed with SIGKILL stops the run within a bounded time, non-zero, and
#     the checkpoint on disk still loads;
#  6. the gradient all-reduce overlapped with backward (buckets, the default) and
#     after it (--overlap off) give the same weights bit for bit; --grad-accum 2 on 2
#     ranks trains as one process with a batch twice as large, and resumes exactly;
#  5. with --optimizer muon, 1 and 2 hold again (the Newton-Schulz step runs on every
#     rank on the same summed gradient), and a run on a time budget alone ends on
#     every rank at the same step with the same weights (rank 0's clock decides);
#  7. a batch-size warm-up (2 sequences, one a rank, growing to 16) trains as one
#     process does, and resumes exactly in the middle of it.
#  8. --eval-task: rank 0 alone scores the task and writes its log.csv column, which
#     equals the single process's (checked in 1.).
#  9. ranks given different options or data (a command line each) stop at once, exit 2,
#     naming what differs, before anything is written: they waited for each other until
#     --comm-timeout (300 s), blaming a dead rank or the network, or stopped at the next
#     evaluation saying that the weights differ.
# 10. a resume on another number of ranks says that its weights will differ by rounding
#     from an unbroken run's, and runs each rank on the default threads (its share of
#     the cores), not on the thread count the run saved: a process's 2 threads on each
#     of 2 ranks took twice the cores, a rank's 1 thread alone left half of them idle.
# 11. --threads N on each of 2 ranks, N the machine's cores, is a warning: 2N threads
#     waiting for each other on N cores, which the check of one process let through.
#   test_mpi.sh FOLIO_BINARY            (exit 77: skipped, no mpirun or no numpy)
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")/.." && pwd)
python=/usr/bin/python3
command -v mpirun >/dev/null || { echo "skipped: no mpirun"; exit 77; }
"$python" -c "import numpy" 2>/dev/null || { echo "skipped: $python has no numpy"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/folio-mpi.XXXXXX")
trap 'rm -rf "$work"' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
head -c 40000 "$here/data/tinyshakespeare.txt" >"$work/corpus.txt"
# The warm-up is given: its default is a tenth of --max-iters, which a run cut at step 16
# and resumed to 30 would not share with a straight run to 30.
model=(--data "$work/corpus.txt" --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --eval-iters 3 --dropout 0
       --warmup-iters 100 --threads 1 --quiet)
# A batch of 5: the ranks hold 2 and 3 sequences, so a wrong weighting of their
# gradients changes the direction of the update (Adam does not see a uniform scale).
common=("${model[@]}" --batch-size 5 --eval-interval 8)

echo "== 1. two ranks against one process"
printf '{"context": "First Citizen:", "choices": ["Before", "we", "proceed any"], "answer": 0}\n%.0s' 1 2 3 \
  >"$work/citizen.jsonl"
"$folio" train "${common[@]}" --max-iters 30 --out "$work/one" --eval-task "$work/citizen.jsonl"
"${mpi[@]}" "$folio" train "${common[@]}" --max-iters 30 --out "$work/two" --eval-task "$work/citizen.jsonl"
"$python" "$here/tests/compare_weights.py" "$work/one" "$work/two" 1e-4
# The evaluations: the same batches, sharded and reduced, give the same losses.
paste -d, "$work/one/log.csv" "$work/two/log.csv" | tail -n +2 | awk -F, '
  { for (i = 2; i <= 3; ++i) { d = $i - $(i + NF / 2); if (d < 0) d = -d; if (d > 2e-5) bad = 1 } }
  END { if (bad) { print "FAILED: the evaluations differ"; exit 1 } print "evaluations agree" }'
# 8. The task's column, written once by rank 0, as the single process wrote it.
head -n 1 "$work/two/log.csv" | grep -q ',citizen$' || { echo "FAILED: no citizen column in log.csv"; exit 1; }
[ "$(grep -c '^step' "$work/two/log.csv")" = 1 ] || { echo "FAILED: log.csv has more than one header"; exit 1; }
diff <(awk -F, '{ print $NF }' "$work/one/log.csv") <(awk -F, '{ print $NF }' "$work/two/log.csv") ||
  { echo "FAILED: the task's scores differ between 1 process and 2 ranks"; exit 1; }
options=(--pos rope --qk-norm --activation relu2 --zero-init-proj --logit-softcap 5 --tie-weights)
"$folio" train "${common[@]}" "${options[@]}" --max-iters 30 --out "$work/one-options"
"${mpi[@]}" "$folio" train "${common[@]}" "${options[@]}" --max-iters 30 --out "$work/two-options"
"$python" "$here/tests/compare_weights.py" "$work/one-options" "$work/two-options" 1e-4

echo "== 2. resume on two ranks repeats exactly"
"${mpi[@]}" "$folio" train "${common[@]}" --max-iters 16 --out "$work/cut"
"${mpi[@]}" "$folio" train --resume --max-iters 30 --out "$work/cut" --threads 1 --quiet
"$python" "$here/tests/compare_weights.py" "$work/two" "$work/cut" 0
# Asked for no more steps than it has done, it says so once: rank 0 alone prints.
"${mpi[@]}" "$folio" train --resume --max-iters 30 --out "$work/cut" --threads 1 >"$work/done.out"
[ "$(grep -c 'nothing left to do' "$work/done.out")" = 1 ] ||
  { cat "$work/done.out"; echo "FAILED: not one line saying there is nothing left to do"; exit 1; }

echo "== 3. a batch smaller than the ranks"
if "${mpi[@]}" "$folio" train "${model[@]}" --batch-size 1 --out "$work/small" 2>"$work/small.err"; then
  echo "FAILED: a batch of 1 on 2 ranks was accepted"; exit 1
fi
grep -q "smaller than the 2 ranks" "$work/small.err" || { cat "$work/small.err"; exit 1; }
[ ! -e "$work/small" ] || { echo "FAILED: it wrote $work/small"; exit 1; }
if "${mpi[@]}" "$folio" train "${model[@]}" --batch-size 8 --batch-warmup 10 --out "$work/small" 2>"$work/small.err"; then
  echo "FAILED: a batch-size warm-up from 1 sequence on 2 ranks was accepted"; exit 1
fi
grep -q "starts with batches of 1 (an eighth of --batch-size 8, rounded up), fewer than the 2 ranks" "$work/small.err" ||
  { cat "$work/small.err"; exit 1; }
[ ! -e "$work/small" ] || { echo "FAILED: it wrote $work/small"; exit 1; }

echo "== 4. a rank killed mid-run"
"${mpi[@]}" "$folio" train "${model[@]}" --batch-size 6 --max-iters 100000000 --eval-interval 20 --out "$work/kill" \
  >"$work/kill.out" 2>"$work/kill.err" &
launcher=$!
for _ in $(seq 600); do [ -s "$work/kill/state.safetensors" ] && break; sleep 0.1; done
[ -s "$work/kill/state.safetensors" ] || { echo "FAILED: no checkpoint after 60 s"; cat "$work/kill.err"; exit 1; }
victim=$(pgrep -P "$launcher" -f "folio train" | tail -n 1)
[ -n "$victim" ] || { echo "FAILED: no rank found under mpirun $launcher"; exit 1; }
kill -KILL "$victim"
start=$SECONDS
for _ in $(seq 300); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$launcher" 2>/dev/null; then
  echo "FAILED: the run still runs 30 s after a rank died"; kill -KILL "$launcher"; exit 1
fi
status=0; wait "$launcher" || status=$?
echo "mpirun ended $((SECONDS - start)) s after the kill, exit $status"
[ "$status" -ne 0 ] || { echo "FAILED: exit 0 after a rank died"; exit 1; }
pkill -KILL -f "$work/kill" 2>/dev/null || true
"$folio" info --checkpoint "$work/kill" >/dev/null || { echo "FAILED: the checkpoint does not load"; exit 1; }
echo "the checkpoint loads"
echo "== 5. Muon, and a time budget"
"$folio" train "${common[@]}" --optimizer muon --max-iters 30 --out "$work/muon_one"
"${mpi[@]}" "$folio" train "${common[@]}" --optimizer muon --max-iters 30 --out "$work/muon_two"
"$python" "$here/tests/compare_weights.py" "$work/muon_one" "$work/muon_two" 1e-4
"${mpi[@]}" "$folio" train "${common[@]}" --optimizer muon --max-iters 16 --out "$work/muon_cut"
"${mpi[@]}" "$folio" train --resume --max-iters 30 --out "$work/muon_cut" --threads 1 --quiet
"$python" "$here/tests/compare_weights.py" "$work/muon_two" "$work/muon_cut" 0
# The weights are compared across ranks at every evaluation, the last one included.
"${mpi[@]}" "$folio" train "${common[@]}" --optimizer muon --max-time 1 --out "$work/timed"
tail -n 1 "$work/timed/log.csv" | awk -F, '$8 < 1 { print "FAILED: stopped after " $8 " s of a 1 s budget"; exit 1 }'
echo "== 6. overlap on and off, and --grad-accum"
"${mpi[@]}" "$folio" train "${common[@]}" --max-iters 30 --overlap off --out "$work/two-after"
"$python" "$here/tests/compare_weights.py" "$work/two" "$work/two-after" 0
"$folio" train "${model[@]}" --batch-size 10 --eval-interval 8 --max-iters 20 --out "$work/accum-one"
"${mpi[@]}" "$folio" train "${common[@]}" --grad-accum 2 --max-iters 20 --out "$work/accum-two"
"$python" "$here/tests/compare_weights.py" "$work/accum-one" "$work/accum-two" 1e-4
"${mpi[@]}" "$folio" train "${common[@]}" --grad-accum 2 --max-iters 12 --out "$work/accum-cut"
"${mpi[@]}" "$folio" train --resume --max-iters 20 --out "$work/accum-cut" --threads 1 --quiet
"$python" "$here/tests/compare_weights.py" "$work/accum-two" "$work/accum-cut" 0
echo "== 7. a batch-size warm-up"
warm=("${model[@]}" --batch-size 16 --batch-warmup 24 --eval-interval 8)
"$folio" train "${warm[@]}" --max-iters 30 --out "$work/warm-one"
"${mpi[@]}" "$folio" train "${warm[@]}" --max-iters 30 --out "$work/warm-two"
"$python" "$here/tests/compare_weights.py" "$work/warm-one" "$work/warm-two" 1e-4
"${mpi[@]}" "$folio" train "${warm[@]}" --max-iters 12 --out "$work/warm-cut"
"${mpi[@]}" "$folio" train --resume --max-iters 30 --out "$work/warm-cut" --threads 1 --quiet
"$python" "$here/tests/compare_weights.py" "$work/warm-two" "$work/warm-cut" 0
echo "== 9. ranks given different options or data"
# One command line a rank (mpirun's A : B): rank 1 trains on the text $1, with the
# options after it. A hang would end at `timeout`, a failure.
apart() {
  local data=$1 status=0
  shift
  timeout 120 mpirun --allow-run-as-root --oversubscribe \
    -np 1 "$folio" train --data "$work/corpus.txt" "${model[@]:2}" --batch-size 5 --max-iters 30 --out "$work/apart" : \
    -np 1 "$folio" train --data "$data" "${model[@]:2}" --batch-size 5 --max-iters 30 --out "$work/apart" "$@" \
    >/dev/null 2>"$work/apart.err" || status=$?
  [ "$status" = 2 ] || { cat "$work/apart.err"; echo "FAILED: ranks apart ($*) exited $status, not 2"; exit 1; }
  [ ! -e "$work/apart" ] || { echo "FAILED: ranks apart ($*) wrote $work/apart"; exit 1; }
}
apart "$work/corpus.txt" --eval-interval 4
grep -q -- "--eval-interval is 250 on rank 0 but 4 here (rank 1)" "$work/apart.err" || { cat "$work/apart.err"; exit 1; }
apart "$work/corpus.txt" --lr 0.002
grep -q -- "--lr is 0.001 on rank 0 but 0.002 here (rank 1)" "$work/apart.err" || { cat "$work/apart.err"; exit 1; }
tail -c 39000 "$work/corpus.txt" >"$work/other.txt"  # another text
apart "$work/other.txt"
grep -q "the data's fingerprint is .* on rank 0 but .* here (rank 1)" "$work/apart.err" || { cat "$work/apart.err"; exit 1; }
echo "== 10. resume on another number of ranks"
# The threads a rank takes by default (cli/common.cpp: apply_threads).
cores=$(getconf _NPROCESSORS_ONLN)
saved_threads() {
  "$python" -c 'import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
print(json.loads(json.loads(raw[8:8 + n])["__metadata__"]["train_config"])["threads"])' "$1/state.safetensors"
}
solo=(--data "$work/corpus.txt" --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --eval-iters 1 --batch-size 4
      --eval-interval 8 --warmup-iters 2)
"$folio" train "${solo[@]}" --threads 2 --max-iters 8 --out "$work/ranks" --quiet
"${mpi[@]}" "$folio" train --resume --max-iters 16 --out "$work/ranks" >"$work/ranks.out"
[ "$(grep -c "the run trained on 1 MPI rank and resumes on 2: each batch is shared out another way" \
     "$work/ranks.out")" = 1 ] || { cat "$work/ranks.out"; echo "FAILED: no one note of the new rank count"; exit 1; }
if [ -z "${OMP_NUM_THREADS:-}" ]; then
  [ "$(saved_threads "$work/ranks")" = $((cores / 2 > 1 ? cores / 2 : 1)) ] ||
    { echo "FAILED: 2 ranks resumed on $(saved_threads "$work/ranks") threads each, not their share of $cores cores"; exit 1; }
fi
"$folio" train --resume --max-iters 24 --out "$work/ranks" >"$work/ranks.out"
grep -q "the run trained on 2 MPI ranks and resumes on 1: .*; it runs on $cores threads\? (the default)" \
  "$work/ranks.out" || [ -n "${OMP_NUM_THREADS:-}" ] || { cat "$work/ranks.out"; echo "FAILED: no note"; exit 1; }
echo "== 11. --threads on each rank beyond the cores"
"${mpi[@]}" "$folio" train "${solo[@]}" --threads "$cores" --max-iters 1 --out "$work/busy" --quiet 2>"$work/busy.err"
[ "$(grep -c -- "--threads $cores on each of the 2 ranks on this machine makes $((2 * cores)) threads" \
     "$work/busy.err")" = 1 ] || { cat "$work/busy.err"; echo "FAILED: no one warning of $((2 * cores)) threads"; exit 1; }
echo "MPI tests passed"
