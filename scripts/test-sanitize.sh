#!/usr/bin/env bash
# Builds folio and its test suite with AddressSanitizer + UndefinedBehaviorSanitizer
# (-DFOLIO_SANITIZE=ON, gcc) into build-asan/ and runs the whole suite there: every
# test, including the ones that run the folio binary, then runs instrumented.
# Any report fails the run: UBSan is built with -fno-sanitize-recover, ASan and its
# leak checker (LeakSanitizer, on by default on Linux) exit non-zero.
#
# No suppressions are needed. Checked: libgomp's thread pool (OpenMP) and oneDNN's
# JIT-generated kernels (not instrumented, but their allocations are ordinary heap
# ones that are freed or reachable at exit) give no ASan, UBSan or leak reports. The
# one accommodation lives in the test that samples generate's memory: it shrinks
# ASan's quarantine for that child, since freed blocks held in quarantine (256 MB by
# default) would look like growth.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
# -O1 -g1: the optimisation level ASan is designed for, and line tables only, which
# is all a report's stack trace reads (file:line). The instrumented build is most of
# this step's time, and halves with them (one test file: 49 s of CPU at -O2 -g, 23 s
# at -O1 -g1); the suite runs about as long.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DFOLIO_SANITIZE=ON -DFOLIO_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs"
# Stack traces for UBSan reports too (ASan prints them anyway).
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
ctest --test-dir build-asan --output-on-failure -j"$jobs"
