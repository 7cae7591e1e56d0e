// --resume of a run directory that lost one of its files since its last save (a copy
// made without it, a disk error): what the resumed run does about it is said, and the
// directory it leaves holds every file of a run again, each one readable.
#include <gtest/gtest.h>

#include "io/checkpoint.h"
#include "tests/support.h"
#include "train/run_state.h"

namespace folio {
namespace {

using namespace folio::testing;

Args tiny_train(const std::string& corpus, const std::string& out) {
  return words("train --data " + corpus + " --out " + out +
               " --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-interval 10"
               " --eval-iters 1 --warmup-iters 2 --threads 1 --max-iters 10 --quiet");
}

// The state remembers the lowest val loss, and best.safetensors holds its weights. With
// that file gone or cut short, a resumed run whose evaluations stay above the remembered
// loss (as a run past its best does) ended with no best.safetensors, or a damaged one,
// and exit 0 without a word. It now says so at the start, and its next evaluation
// becomes best.safetensors; a run the guards stop before one says the file is missing.
TEST(ResumeLostFiles, AMissingOrDamagedBestCheckpointIsSaidAndMadeAgain) {
  TempDir d("resume_lost_best");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt");
  for (const std::string how : {"missing", "damaged", "stopped"}) {
    SCOPED_TRACE(how);
    const std::string run = d / how, best = run + "/best.safetensors", state = run + "/state.safetensors";
    const Result first = run_folio(tiny_train(corpus, run), d.path);
    ASSERT_EQ(first.code, 0) << first.err;
    TrainState st = load_state(state);
    st.best_val_loss = 0.5f;  // below any evaluation of this tiny model: none of the resumed run's is a new best
    save_state(state, st);
    if (how == "damaged") spit(best, slurp(best).substr(0, 100));
    else fs::remove(best);
    Args resume = words("train --resume --out " + run + " --threads 1 --max-iters 20 --quiet");
    if (how == "stopped") resume.insert(resume.end(), {"--fault-inject", "nan-grad@12", "--on-divergence", "stop"});
    const Result r = run_folio(resume, d.path);
    expect_contains(r.err, {"warning: " + best + (how == "damaged" ? " cannot be read (" : " is missing:"),
                            "the lowest val loss so far (0.5) is held by no file, so the next evaluation's weights "
                            "become best.safetensors"});
    if (how == "stopped") {
      EXPECT_EQ(r.code, 3) << r.err;
      expect_contains(r.err, {"best.safetensors there is missing or damaged (as it was when the run resumed)"});
      continue;
    }
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(load_model(best).step, 20);
    expect_contains(run_folio({"info", "--checkpoint", run}, d.path).out, {"best         step 20, val loss "});
  }
}

// A resumed run whose log.csv is gone or empty wrote its rows without the header, into
// a log that folio plot refused ("not a folio log.csv"), and said nothing. It now starts
// a new log, header first, and says so.
TEST(ResumeLostFiles, AMissingOrEmptyLogStartsAgainWithItsHeader) {
  TempDir d("resume_lost_log");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt");
  for (const std::string how : {"missing", "empty"}) {
    SCOPED_TRACE(how);
    const std::string run = d / how, log = run + "/log.csv";
    const Result first = run_folio(tiny_train(corpus, run), d.path);
    ASSERT_EQ(first.code, 0) << first.err;
    if (how == "empty") spit(log, "");
    else fs::remove(log);
    const Result r = run_folio(words("train --resume --out " + run + " --threads 1 --max-iters 20 --quiet"), d.path);
    ASSERT_EQ(r.code, 0) << r.err;
    expect_contains(r.err, {"warning: " + log + " is " + how + ": a new one starts with the evaluations after step 10"});
    const std::string text = slurp(log);
    EXPECT_TRUE(text.starts_with("step,train_loss,val_loss,")) << text;
    expect_contains(text, {"\n20,"});
    const Result plot = run_folio({"plot", run, "--out", d / (how + ".svg")}, d.path);
    EXPECT_EQ(plot.code, 0) << plot.err;
  }
}

}  // namespace
}  // namespace folio
