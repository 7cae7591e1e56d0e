#!/usr/bin/env bash
# Installs the Debian 12 packages folio builds against, only those that are missing,
# plus any given as arguments (scripts/fuzz.sh and bench/peer/compare.sh add theirs).
# With --only, installs just the packages given (scripts/test-fresh.sh's tools); with
# --tests, just the packages only some tests use (scripts/test.sh installs them).
#   bash scripts/setup.sh
#   bash scripts/setup.sh --tests
#   bash scripts/setup.sh clang libomp-14-dev
#   bash scripts/setup.sh --only mmdebstrap zstd
#
# The list is explicit because apt runs with --no-install-recommends: a package that
# is only a Recommends of another is not pulled in, and scripts/test-fresh.sh checks
# in a minimal Debian root that nothing is missing.
set -euo pipefail
build_packages=(
  build-essential                # g++, make, libc headers
  cmake
  libdnnl-dev                    # oneDNN: matrix products
  ocl-icd-opencl-dev             # only a Recommends of libdnnl-dev, but dnnl-config.cmake
                                 # calls find_package(OpenCL REQUIRED)
  libboost-program-options-dev   # the folio command line
  nlohmann-json3-dev             # the JSON lexer under io/json.cpp, and folio serve's request and
                                 # response bodies (header-only)
  libcpp-httplib-dev             # folio serve's HTTP server (serve/; Debian builds it as a library, found through pkg-config)
  curl                           # tests: folio serve's raw SSE, as a client no one here wrote
  libsentencepiece-dev           # subword tokenizers (data/spm_tokenizer.cpp)
  libpcre2-dev                   # GPT-2's pre-tokenizer pattern (data/bytebpe_tokenizer.cpp)
  pkg-config                     # how CMake finds SentencePiece (it ships no CMake package)
  sentencepiece                  # tests: spm_train/spm_encode, the reference for folio's tokens
  python3-sentencepiece          # tests: folio_numpy.py on subword checkpoints; token shards against spm's own encoding
  libopenmpi-dev openmpi-bin     # folio train on several processes (mpirun); cmake -DFOLIO_MPI=OFF builds without
  iproute2                       # tests and bench: ip netns and tc, two hosts on one machine (scripts/netns-mpi.sh)
  libgtest-dev                   # tests/
  libbenchmark-dev               # bench/
  python3-numpy                  # tests: scripts/folio_numpy.py against folio eval, SVGs through an XML parser;
                                 # import folio's arrays
  python3-dev                    # import folio (python/): Python.h and the extension's suffix, for /usr/bin/python3
  pybind11-dev                   # import folio: the C++ side of the bindings and its CMake package
  python3-pybind11               # import folio: pybind11 as /usr/bin/python3 sees it (its numpy support matches)
  python3-pytest                 # tests: the Python module's tests (tests/python, ctest's Python.Pytest)
  python3-matplotlib             # examples/python/attention_heatmap.py, which the Python tests run
  python3-yaml                   # tests: llama.cpp's gguf-py (tests/hf_gpt2_ggufpy.py) imports yaml
)
# Beyond the build's: scripts/run.sh does without these, so they are not above.
test_packages=(
  chromium                       # tests: folio serve's page in a real browser (Serve.PageInChromium);
                                 # 166 packages, about 70 s
)
if [ "${1:-}" = "--only" ]; then
  shift
  packages=("$@")
elif [ "${1:-}" = "--tests" ]; then
  packages=("${test_packages[@]}")
else
  packages=("${build_packages[@]}" "$@")
fi
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
