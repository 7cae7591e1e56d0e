#!/usr/bin/env bash
# Set up, build, and run the whole test suite, the tests that hold folio to
# implementations no one here wrote included (llama.cpp, tiktoken, the openai client, a
# browser). Beyond the build's packages it installs Debian's chromium
# (scripts/setup.sh --tests) and, where the machine has no Node 20 with npm, fetches
# them from the npm registry into build/node (tests/npm_package.sh's node_for_tests);
# those tests then install their npm packages into the build tree. Where an install is
# refused (no sudo, no network) the suite runs anyway: it ends by listing each test
# that did not run, why, and the command that runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The tests' own installs: chromium (about 70 s in a fresh Debian 12 root) and Node (8 s).
test_installs() {
  bash scripts/setup.sh --tests ||
    echo "[test] the tests' own packages could not be installed (above): the tests that need them will skip"
  source tests/npm_package.sh
  node_for_tests build/node ||
    echo "[test] no Node 20 and npm: the tests that hold folio to npm packages will skip"
}
# They are downloads and the build is compute, so they run side by side (their output
# shown after the build), unless sudo may ask for a password, which it cannot do
# from behind the build.
mkdir -p build
build_status=0
if [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null; then
  test_installs >build/test-installs.log 2>&1 &
  installs=$!
  bash scripts/build.sh || build_status=$?
  wait "$installs" || true
  cat build/test-installs.log
else
  test_installs
  bash scripts/build.sh || build_status=$?
fi
((build_status == 0)) || exit "$build_status"
status=0
ctest --test-dir build --output-on-failure -j"$(nproc 2>/dev/null || echo 2)" \
  --output-junit "$PWD/build/junit.xml" || status=$?

# Each skipped test with the reason it printed (a script's "skipped: ..." line, or what
# GTEST_SKIP() said), into build/skipped-tests.txt (name TAB reason: scripts/test-fresh.sh
# reads it) and onto the terminal.
python3 - build/junit.xml build/skipped-tests.txt <<'EOF' || echo "[test] no list of skipped tests: build/junit.xml could not be read"
import re, sys
import xml.etree.ElementTree as ET
skipped = []
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    # A test that could not start is "notrun" too, but ctest counts it as failed.
    how = case.find("skipped").get("message", "") if case.find("skipped") is not None else ""
    if case.get("status") != "disabled" and not how.startswith("SKIP_"):
        continue
    out = case.findtext("system-out") or ""
    why = re.search(r"^skipped: (.+)$", out, re.M) or re.search(r": Skipped\n((?:.+\n?)+?)(?:\n|\[  SKIPPED)", out)
    reason = " ".join(why.group(1).split()) if why else how or "disabled"
    skipped.append((case.get("name"), reason))
with open(sys.argv[2], "w") as f:
    f.writelines(f"{name}\t{reason}\n" for name, reason in skipped)
if not skipped:
    print("[test] every test ran: none skipped")
    sys.exit(0)
print(f"[test] {len(skipped)} test{'s' if len(skipped) > 1 else ''} did not run, so what they check was not checked here:")
width = max(len(name) for name, _ in skipped)
for name, reason in skipped:
    print(f"  {name:<{width}}  {reason}")
names = "|".join(re.escape(name) for name, _ in skipped)
print("[test] with their causes fixed (above), this runs them:")
print(f"  ctest --test-dir build --output-on-failure -R '^({names})$'")
EOF
exit "$status"
