# Sourced by the scripts and tests that start folio serve. serve_on_free_port LOG ARGS...
# starts "$folio serve --port 0 ARGS..." in the background, its output in LOG, and sets
# $server (its pid) and $port (the one the kernel gave it, read from its banner). When no
# port shows within 20 s it prints LOG and returns 1.
serve_on_free_port() {
  local log=$1
  shift
  "$folio" serve --port 0 "$@" >"$log" 2>&1 &
  server=$!
  port=""
  for _ in $(seq 200); do
    port=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$log")
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  cat "$log"
  return 1
}
