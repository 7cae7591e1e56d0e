// Runs written by folio 0.3.0 (tests/data/run-0.3.0, its README says how) resume with
// this folio bit-exactly, so a change of how the run state is written or read (the
// optimizer's state, the options' JSON) cannot strand the runs already on disk:
//  - every saved tensor is read back as it is on disk, at the step saved;
//  - resuming 20 -> 40 at once and 20 -> 30 -> 40 give the same files (the state the
//    old run's resume saves reads back whole);
//  - where this binary repeats the old run's 20 steps to the bit (the same CPU kernels
//    and compiler flags as the binary that wrote it: not under the sanitizers, nor on
//    a CPU whose kernels differ), the resumed files equal 40 straight steps.
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

// The files of a run directory that must agree, and the state's tensors and metadata
// but for the training time it measured (and, with `guards` false, the divergence
// guards' window, which an old run did not save: resumed, it holds only the steps since).
void expect_same_run(const std::string& a_dir, const std::string& b_dir, const std::string& what, bool guards = true) {
  for (const char* file : {"/model.safetensors", "/best.safetensors"})
    EXPECT_TRUE(slurp(a_dir + file) == slurp(b_dir + file)) << file << " differs: " << what;
  const SafetensorsFile a = load_safetensors(a_dir + "/state.safetensors");
  const SafetensorsFile b = load_safetensors(b_dir + "/state.safetensors");
  ASSERT_EQ(a.tensors.size(), b.tensors.size()) << what;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name) << what;
    EXPECT_TRUE(a.tensors[i].tensor.to_vector() == b.tensors[i].tensor.to_vector())
        << a.tensors[i].name << " differs: " << what;
  }
  ASSERT_EQ(a.metadata.size(), b.metadata.size()) << what;
  for (size_t i = 0; i < a.metadata.size(); ++i)
    if (a.metadata[i].first != "train_seconds" && (guards || a.metadata[i].first != "guards")) {
      EXPECT_EQ(a.metadata[i], b.metadata[i]) << what;
    }
}

TEST_P(OldRuns, ResumeBitExactly) {
  const fs::path data = fs::path(FOLIO_SOURCE_DIR) / "tests" / "data" / "run-0.3.0";
  const TempDir dir(std::string("old_run_") + GetParam().name);
  const std::string corpus = dir / "corpus.txt", old_run = (data / GetParam().name).string();
  fs::copy_file(data / "corpus.txt", corpus);

  // Read as it is on disk: the step, and every tensor to the bit, in the optimizer's state.
  const TrainState loaded = load_state(old_run + "/state.safetensors");
  EXPECT_EQ(loaded.step, 20);
  const SafetensorsFile raw = load_safetensors(old_run + "/state.safetensors");
  for (const NamedTensor& t : raw.tensors) {
    if (t.name == "ema.weights") {
      EXPECT_TRUE(t.tensor.to_vector() == loaded.ema_weights) << "ema.weights was not read as saved";
      continue;
    }
    const Tensor* read = loaded.optimizer.find(t.name);
    ASSERT_NE(read, nullptr) << t.name << " was not read";
    EXPECT_TRUE(read->to_vector() == t.tensor.to_vector()) << t.name << " was not read as saved";
  }

  // 0.3.0 saved --data as the path it was given then, and no thread count: both again.
  auto resume = [&](const std::string& out, int to) {
    const Result r = run_folio({"train", "--out", out, "--resume", "--data", corpus, "--threads", "1", "--max-iters",
                                std::to_string(to), "--quiet"},
                               dir.path);
    ASSERT_EQ(r.code, 0) << r.err;
  };
  const std::string direct = dir / "direct", split = dir / "split";
  fs::copy(old_run, direct);
  fs::copy(old_run, split);
  resume(direct, 40);
  resume(split, 30);
  resume(split, 40);
  EXPECT_EQ(load_state(direct + "/state.safetensors").step, 40);
  expect_same_run(direct, split, "resumed 20 -> 40 against 20 -> 30 -> 40");

  auto train = [&](const std::string& out, int steps) {
    const Result s = run_folio(words(cat("train --data ", corpus, " ", kCommon, " ", GetParam().flags,
                                         " --max-iters ", steps, " --out ", out)),
                               dir.path);
    ASSERT_EQ(s.code, 0) << s.err;
  };
  const std::string first20 = dir / "first20", straight = dir / "straight";
  train(first20, 20);
  if (slurp(first20 + "/model.safetensors") != slurp(old_run + "/model.safetensors")) {
    std::printf("this binary's first 20 steps differ from the old run's (other CPU kernels or compiler flags): "
                "resumed runs are compared with each other only\n");
    return;
  }
  train(straight, 40);
  expect_same_run(direct, straight, "resumed 20 -> 40 against 40 straight steps", /*guards=*/false);
}

INSTANTIATE_TEST_SUITE_P(Of030, OldRuns,
                         ::testing::Values(OldRun{"adamw", "--dropout 0.1 --ema 0.9"},
                                           OldRun{"muon", "--optimizer muon --muon-momentum-warmup 30"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace folio
