# Sourced by the tests that use an npm package as their independent client.
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
