// Replays fuzz/corpus through the checkpoint fuzzer's own entry point, so the normal
// suite guards every fix without needing clang. The corpus holds small inputs the
// fuzzer found that reach rare paths (hash names: any outcome but a crash), and
// damaged copies of real checkpoints that the reader used to get wrong
// (fuzz/make_regressions.py): accept-* must load, reject-* must be refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "fuzz/checkpoint_entry.h"
#include "fuzz/gguf_entry.h"
#include "tests/support.h"

namespace folio {
namespace {

using namespace folio::testing;

TEST(FuzzCorpus, EveryInputLoadsOrIsAFolioError) {
  const fs::path corpus = fs::path(FOLIO_SOURCE_DIR) / "fuzz" / "corpus";
  ASSERT_TRUE(fs::is_directory(corpus)) << corpus;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(corpus))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 10u) << "fuzz/corpus has lost its inputs";

  TempDir tmp("fuzz_corpus");
  const std::string input = tmp / "input.safetensors";
  uintmax_t total = 0;
  int accepted = 0;
  for (const fs::path& f : files) {
    const std::string bytes = slurp(f), name = f.filename().string();
    total += bytes.size();
    int n = -1;
    // Anything but success or folio::Error escapes load_checkpoint_bytes (or aborts).
    EXPECT_NO_THROW(n = fuzz::load_checkpoint_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), input))
        << name;
    if (name.starts_with("accept-")) {
      EXPECT_EQ(n, 1) << name << " must load as a model or a training state";
    } else if (name.starts_with("reject-")) {
      EXPECT_EQ(n, 0) << name << " must be refused";
    }
    accepted += n > 0;
  }
  EXPECT_GE(accepted, 1) << "no input of the corpus is a valid checkpoint any more";
  EXPECT_LT(total, 200u * 1024) << "keep fuzz/corpus small: minimize the inputs (libFuzzer -merge=1)";
}

// The same for the GGUF reader and folio import's mapping (fuzz/fuzz_gguf.cpp), over
// fuzz/corpus-gguf: exported models (accept-*) and damaged copies (reject-*).
TEST(FuzzCorpus, EveryGgufInputImportsOrIsAFolioError) {
  const fs::path corpus = fs::path(FOLIO_SOURCE_DIR) / "fuzz" / "corpus-gguf";
  ASSERT_TRUE(fs::is_directory(corpus)) << corpus;
  int accepted = 0, seen = 0;
  for (const auto& e : fs::directory_iterator(corpus)) {
    const std::string bytes = slurp(e.path()), name = e.path().filename().string();
    int n = -1;
    EXPECT_NO_THROW(n = fuzz::load_gguf_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())) << name;
    if (name.starts_with("accept-")) {
      EXPECT_EQ(n, 1) << name << " must import";
    }
    if (name.starts_with("reject-")) {
      EXPECT_EQ(n, 0) << name << " must be refused";
    }
    accepted += n > 0, ++seen;
  }
  EXPECT_GE(seen, 5);
  EXPECT_GE(accepted, 2);
}

}  // namespace
}  // namespace folio
