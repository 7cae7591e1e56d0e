# Sourced by the shell tests that use an npm package as their independent client.
#   npm_package DIR NAME@VERSION [NOTE]
# Installs the package into DIR/node_modules once (DIR is kept in the build tree
# between runs), or skips the test (exit 77) when npm cannot install it; NOTE is added
# to the message (what the test checked before it got here).
npm_package() {
  local dir=$1 spec=$2 name=${2%@*}
  [ -d "$dir/node_modules/$name" ] && return 0
  mkdir -p "$dir"
  (cd "$dir" && npm install --no-audit --no-fund --silent "$spec" >/dev/null 2>&1) || {
    echo "skipped: npm could not install $spec (is the npm registry reachable?)${3:+; $3}"
    exit 77
  }
}
