// --weights f32|bf16|int8 from the outside: folio eval's loss with weights stored small
// against f32's on a model trained here, folio generate and folio serve (batched and
// not) with int8 weights, and the option's refusals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve_support.h"
#include "support.h"

namespace folio {
namespace {

using testing::Result;

class WeightsCli : public testing::CliCorpusTest {
 protected:
  double eval_loss(const std::string& weights) const {
    const Result r = folio("eval --checkpoint " + (dir_.path / "run").string() + " --json --weights " + weights);
    EXPECT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_EQ(j.value("weights", ""), weights) << r.out;
    return j.value("loss", 0.0);
  }
};

// A model trained for a few seconds, so that its weights have the spread of trained
// ones (quantizing a random init says little): int8 and bf16 cost less than 0.01 nats
// a token on its validation text.
TEST_F(WeightsCli, EvalGenerateAndRefusals) {
  const Result t = folio("train --data " + text() + " --n-layer 2 --n-head 2 --n-embd 64 --block-size 32 --out " +
                         (dir_.path / "run").string() +
                         " --batch-size 8 --eval-interval 100 --eval-iters 2 --warmup-iters 5 --lr 3e-3 --quiet "
                         "--threads 2 --max-iters 100");
  ASSERT_EQ(t.code, 0) << t.err;
  const double f32 = eval_loss("f32"), int8 = eval_loss("int8"), bf16 = eval_loss("bf16");
  EXPECT_LT(f32, 3.0);  // it learned something
  EXPECT_NEAR(int8, f32, 0.01);
  EXPECT_NEAR(bf16, f32, 0.01);
  EXPECT_NE(int8, f32);  // the decoder did read other weights
  std::printf("[ loss ] f32 %.6f  int8 %+.6f  bf16 %+.6f\n", f32, int8 - f32, bf16 - f32);

  const std::string run = " --checkpoint " + (dir_.path / "run").string();
  const Result g = folio("generate" + run + " --prompt 'First' --max-new-tokens 40 --greedy --weights int8");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out.rfind("First", 0), 0u) << g.out;
  EXPECT_GT(g.out.size(), 40u) << g.out;

  for (const char* cmd : {"generate", "eval", "serve"}) {
    const Result bad = folio(std::string(cmd) + run + " --weights int4");
    EXPECT_EQ(bad.code, 2) << cmd << ": " << bad.err;
    testing::expect_contains(bad.err, {"--weights must be f32, bf16 or int8, got 'int4'"});
  }
  for (const char* cmd : {"generate", "eval", "serve"}) {  // a kernel the decoder does not have: bad usage too
    const Result bad = testing::run_folio(testing::words(std::string(cmd) + run + " --weights int8"), dir_.path, 300,
                                          {"FOLIO_INT8_KERNEL=amx"});
    EXPECT_EQ(bad.code, 2) << cmd << ": " << bad.err;
    testing::expect_contains(bad.err, {"FOLIO_INT8_KERNEL=amx", "expected one of plain, ", "widened"});
  }
  const Result no_cache = folio("generate" + run + " --weights int8 --no-kv-cache");
  EXPECT_EQ(no_cache.code, 2) << no_cache.err;
  testing::expect_contains(no_cache.err, {"--weights int8", "--no-kv-cache"});
}

// folio serve's batched slots on int8 weights: a request as any other.
class ServeInt8 : public serve_test::ServeRoutes {};

TEST_F(ServeInt8, CompletesARequest) {
  serve::ServerOptions o;
  o.scheduler.weights = infer::Weights::int8;
  start(o);
  auto r = client().Post("/v1/completions", R"({"prompt": "abc", "max_tokens": 20, "seed": 1})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto j = serve_test::json::parse(r->body);
  EXPECT_EQ(j["usage"]["completion_tokens"], 20);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

// --no-batching: a thread and a decoder per slot, all on one stored copy of the int8
// matrices (infer::Decoder::store).
TEST_F(ServeInt8, CompletesRequestsOnUnbatchedSlots) {
  serve::ServerOptions o;
  o.scheduler.weights = infer::Weights::int8;
  o.scheduler.batched = false;
  o.scheduler.slots = 2;
  start(o);
  for (int i = 0; i < 2; ++i) {
    auto r = client().Post("/v1/completions", R"({"prompt": "abc", "max_tokens": 8, "seed": 1})", "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(serve_test::json::parse(r->body)["usage"]["completion_tokens"], 8);
  }
}

}  // namespace
}  // namespace folio
