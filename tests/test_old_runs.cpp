// Runs written by folio 0.3.0 (tests/data/run-0.3.0, its README says how) resume with
// this folio bit-exactly: their 20 saved steps and 20 resumed ones give the files of
// 40 straight steps, so a change of how the run state is written or read (the
// optimizer's state, the options' JSON) cannot strand the runs already on disk.
#include <gtest/gtest.h>

#include <string>

#include "io/safetensors.h"
#include "tests/support.h"
#include "train/run_state.h"

namespace folio {
namespace {

using namespace folio::testing;

struct OldRun {
  const char* name;   // its directory under tests/data/run-0.3.0
  const char* flags;  // what it was started with beyond the common flags
};

// As in tests/data/run-0.3.0/README.md, without --max-iters.
constexpr const char* kCommon =
    "--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --lr-decay-iters 40 --warmup-iters 5 "
    "--eval-interval 10 --eval-iters 2 --threads 1 --quiet";

class OldRuns : public ::testing::TestWithParam<OldRun> {};

TEST_P(OldRuns, ResumeBitExactly) {
  const fs::path data = fs::path(FOLIO_SOURCE_DIR) / "tests" / "data" / "run-0.3.0";
  const TempDir dir(std::string("old_run_") + GetParam().name);
  const std::string corpus = dir / "corpus.txt", resumed = dir / "resumed", straight = dir / "straight";
  fs::copy_file(data / "corpus.txt", corpus);
  fs::copy(data / GetParam().name, resumed);
  EXPECT_EQ(load_state(resumed + "/state.safetensors").step, 20);

  // 0.3.0 saved --data as the path it was given then, and no thread count: both again.
  const Result r = run_folio({"train", "--out", resumed, "--resume", "--data", corpus, "--threads", "1",
                              "--max-iters", "40", "--quiet"},
                             dir.path);
  ASSERT_EQ(r.code, 0) << r.err;
  const Result s = run_folio(words(cat("train --data ", corpus, " ", kCommon, " ", GetParam().flags,
                                       " --max-iters 40 --out ", straight)),
                             dir.path);
  ASSERT_EQ(s.code, 0) << s.err;

  for (const char* file : {"/model.safetensors", "/best.safetensors"})
    EXPECT_TRUE(slurp(resumed + file) == slurp(straight + file)) << file << " differs after the resume";
  // The state too, but for the training time it measured.
  const SafetensorsFile a = load_safetensors(resumed + "/state.safetensors");
  const SafetensorsFile b = load_safetensors(straight + "/state.safetensors");
  EXPECT_EQ(load_state(a.path).step, 40);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
    EXPECT_TRUE(a.tensors[i].tensor.to_vector() == b.tensors[i].tensor.to_vector()) << a.tensors[i].name << " differs";
  }
  ASSERT_EQ(a.metadata.size(), b.metadata.size());
  for (size_t i = 0; i < a.metadata.size(); ++i)
    if (a.metadata[i].first != "train_seconds") EXPECT_EQ(a.metadata[i], b.metadata[i]);
}

INSTANTIATE_TEST_SUITE_P(Of030, OldRuns,
                         ::testing::Values(OldRun{"adamw", "--dropout 0.1 --ema 0.9"},
                                           OldRun{"muon", "--optimizer muon --muon-momentum-warmup 30"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace folio
