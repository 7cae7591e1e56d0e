#pragma once
// llama.cpp for the tests that hold folio's GGUF export to it (test_gguf_llamacpp.cpp,
// test_option_walk.cpp): node-llama-cpp installed once into the build tree, and the
// probabilities its logits give, to compare with llama.cpp's.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "support.h"

namespace folio::testing {

// node-llama-cpp in the build tree (one install for every run of the suite), or "" when
// it cannot be had here.
inline std::string llama_npm_dir(std::string& why) {
  if (std::system("command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1") != 0) {
    why = "node and npm are not installed (bash scripts/test.sh fetches Node 20 and npm into build/node)";
    return "";
  }
  if (std::system("node -e 'process.exit(Number(process.versions.node.split(\".\")[0]) >= 20 ? 0 : 1)'") != 0) {
    why = "node-llama-cpp 3.22 needs Node 20 or later (bash scripts/test.sh fetches Node 20 and npm into build/node)";
    return "";
  }
  // FOLIO_GGUF_NPM_DIR shares one install between build trees (85 MB each otherwise).
  const char* shared = std::getenv("FOLIO_GGUF_NPM_DIR");
  const fs::path dir = shared && *shared ? fs::path(shared) : fs::path(FOLIO_BINARY).parent_path() / "tests" / "gguf-npm";
  // Through tests/npm_package.sh, which Interop.HfGpt2GgufPyMatchesLlamaCpp uses on the
  // same directory: its lock lets the first test install while the other waits. The
  // prebuilt linux-x64 binaries make the package's postinstall download unneeded, and
  // --omit=optional leaves out the CUDA and Vulkan builds.
  const std::string install = "bash -c 'source \"" FOLIO_SOURCE_DIR "/tests/npm_package.sh\" && npm_install_once \"" +
                              dir.string() +
                              "\" node_modules/node-llama-cpp/dist/index.js --omit=optional node-llama-cpp@3.22.1 "
                              "@node-llama-cpp/linux-x64@3.22.1'";
  if (std::system(install.c_str()) != 0) {
    why = "npm could not install node-llama-cpp (is the npm registry reachable?); see " + (dir / "npm.log").string();
    return "";
  }
  return dir.string();
}

inline std::vector<double> softmax(const float* logits, int64_t V) {
  std::vector<double> p(static_cast<size_t>(V));
  double top = logits[0], sum = 0.0;
  for (int64_t i = 1; i < V; ++i) top = std::max(top, double(logits[i]));
  for (int64_t i = 0; i < V; ++i) sum += p[size_t(i)] = std::exp(double(logits[i]) - top);
  for (double& x : p) x /= sum;
  return p;
}

}  // namespace folio::testing
