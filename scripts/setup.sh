#!/usr/bin/env bash
# Installs the Debian packages folio builds against, and any more given as arguments
# (scripts/fuzz.sh and bench/peer/compare.sh add theirs), only those that are missing.
#   bash scripts/setup.sh
#   bash scripts/setup.sh clang libomp-14-dev
set -euo pipefail
packages=(build-essential cmake libdnnl-dev libboost-program-options-dev libgtest-dev libbenchmark-dev "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
