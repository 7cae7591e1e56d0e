#!/usr/bin/env bash
# `import folio` from a fresh clone in one command: installs the packages (scripts/setup.sh),
# builds the Python module alone (build/python/folio), and runs Debian's /usr/bin/python3
# with it on its path, the interpreter it is built for (its numpy is python3-numpy; a
# pyenv or venv python may lack it). Arguments go to python3.
#   bash scripts/python.sh -c 'import folio; print(folio.__version__)'
#   bash scripts/python.sh examples/python/sweep.py
#   bash scripts/python.sh            # an interactive interpreter with folio
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
(cd "$repo" && bash scripts/setup.sh && bash scripts/build.sh folio_python) >&2
PYTHONPATH="$repo/build/python${PYTHONPATH:+:$PYTHONPATH}" exec /usr/bin/python3 "$@"
