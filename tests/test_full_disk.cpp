// A save the disk has no room for, through the folio binary: the run fails (exit 1)
// saying which checkpoint is kept, leaves no half-saved weights behind to take the
// room a later save needs, and --resume continues from the kept checkpoint once
// there is room. A file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored, so a write
// past it fails with EFBIG) stands in for a full disk: no mount, no root.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <set>

#include "io/checkpoint.h"
#include "tests/support.h"
#include "train/run_state.h"

namespace folio {
namespace {

using namespace folio::testing;

Args tiny_train(const std::string& corpus, const std::string& out, int64_t max_iters) {
  return {"train", "--data", corpus, "--out", out, "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
          "--block-size", "16", "--batch-size", "4", "--eval-interval", "10", "--eval-iters", "1",
          "--warmup-iters", "2", "--threads", "1", "--quiet", "--max-iters", std::to_string(max_iters)};
}

// Runs folio with files limited to `max_bytes` (the limit and the ignored SIGXFSZ are
// the child's: set around the fork, restored at once).
Result run_folio_limited(const Args& args, const TempDir& d, rlim_t max_bytes) {
  rlimit before{};
  ::getrlimit(RLIMIT_FSIZE, &before);
  const rlimit limited{max_bytes, before.rlim_max};
  const auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  ::setrlimit(RLIMIT_FSIZE, &limited);
  const Child c = spawn_folio(args, d / "limited.out", d / "limited.err");
  ::setrlimit(RLIMIT_FSIZE, &before);
  ::signal(SIGXFSZ, old_handler);
  Result r;
  r.exit = wait_child(c.pid, 120);
  r.code = r.exit.code;
  r.out = slurp(d / "limited.out");
  r.err = slurp(d / "limited.err");
  return r;
}

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

TEST(FullDisk, AFailedSaveKeepsTheLastCheckpointAndLeavesNoPendingWeights) {
  TempDir d("full_disk");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt"), run = d / "run";
  const Result first = run_folio(tiny_train(corpus, run, 10), d.path);
  ASSERT_EQ(first.code, 0) << first.err;
  const std::set<std::string> files = entries(run);
  // Room for the weights, not for the state (about twice their size): the save fails
  // after the weights are written, at its commit.
  const auto model_bytes = fs::file_size(run + "/model.safetensors");
  const auto state_bytes = fs::file_size(run + "/state.safetensors");
  ASSERT_LT(model_bytes, state_bytes);
  Args resume{"train", "--resume", "--out", run, "--max-iters", "20"};
  const Result full = run_folio_limited(resume, d, (model_bytes + state_bytes) / 2);
  EXPECT_EQ(full.code, 1) << full.err;
  expect_contains(full.err, {run + "/state.safetensors", "the checkpoint of step 10", "is kept in " + run});
  EXPECT_EQ(entries(run), files) << "a failed save left files behind";
  EXPECT_EQ(load_model(run).step, 10);
  EXPECT_EQ(load_state(run + "/state.safetensors").step, 10);
  // With room again, the run goes on from the kept checkpoint.
  const Result again = run_folio(resume, d.path);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(load_model(run).step, 20);
}

}  // namespace
}  // namespace folio
