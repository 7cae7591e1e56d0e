// The update/weight ratio per parameter group (train/update_ratio.h): every parameter
// of a model with every option lands in the group a user would name, the ratio of a
// known update is what it should be, and a run's log.csv has the columns, measured on
// the step before each evaluation, which folio plot --y draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "autograd/parallel.h"
#include "nn/transformer.h"
#include "tests/support.h"
#include "train/progress.h"
#include "train/update_ratio.h"

namespace folio {
namespace {

using namespace folio::testing;

nn::GPTConfig every_option() {
  nn::GPTConfig c{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8};
  c.bigram = c.value_embed = c.x0_shortcut = c.unet_skips = true;
  c.mtp = 0.5f;
  return c;
}

TEST(UpdateRatio, EveryParameterHasTheGroupItsNameSays) {
  const nn::GPT model(every_option());
  std::map<std::string, ParamGroup> seen;
  for (const auto& [name, p] : model.named_parameters()) seen[name] = group_of(name);
  // Each group, with the names of some of its parameters.
  const std::map<ParamGroup, std::vector<std::string>> expected = {
      {ParamGroup::embeddings,
       {"token_embedding.weight", "position_embedding.weight", "bigram_embedding.weight", "value_embeddings.1.weight"}},
      {ParamGroup::attention, {"blocks.1.attn.proj.weight"}},
      {ParamGroup::feed_forward, {"blocks.0.ffwd.fc.bias"}},
      {ParamGroup::norms, {"blocks.0.ln1.weight", "blocks.1.ln2.bias", "ln_f.weight", "x0_gates.0", "skip_gates.0"}},
      {ParamGroup::output, {"lm_head.weight", "mtp_head.bias"}}};
  for (const auto& [group, names] : expected)
    for (const std::string& name : names) {
      ASSERT_TRUE(seen.count(name)) << name << " is not a parameter of the model any more";
      EXPECT_EQ(seen[name], group) << name;
    }
  for (const auto& [name, group] : seen)  // nothing about attention or feed-forward falls elsewhere
    EXPECT_EQ(group == ParamGroup::attention, name.find(".attn.") != std::string::npos) << name;
  EXPECT_EQ(group_of("blocks.0.attn_gate.weight"), ParamGroup::embeddings) << "a segment, not a prefix";
  EXPECT_STREQ(column_name(ParamGroup::feed_forward), "update_ratio_feed_forward");
}

// Moving every feed-forward weight w to 1.5 w is a ratio of 0.5 there and 0 elsewhere,
// whatever the thread count.
TEST(UpdateRatio, AKnownUpdateGivesItsRatioInItsGroupAlone) {
  const nn::GPT model(every_option());
  const Tensor& flat = model.flat_parameters();
  const std::vector<float> start(flat.data(), flat.data() + flat.numel());
  UpdateRatio ratio(model.named_parameters(), flat);
  const auto measure = [&] {
    std::copy(start.begin(), start.end(), flat.data());
    ratio.before(flat);
    for (const auto& [name, p] : model.named_parameters())
      if (group_of(name) == ParamGroup::feed_forward)
        for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] *= 1.5f;
    return ratio.after(flat);
  };
  const UpdateRatios r = measure();
  EXPECT_NEAR(r[size_t(ParamGroup::feed_forward)], 0.5, 1e-6);
  for (ParamGroup g : {ParamGroup::embeddings, ParamGroup::attention, ParamGroup::norms, ParamGroup::output})
    EXPECT_EQ(r[size_t(g)], 0.0) << column_name(g);
  set_num_threads(2);
  EXPECT_TRUE(measure() == r);
  set_num_threads(0);
  EXPECT_THROW(ratio.after(flat), Error);  // after() frees what before() kept
}

double log_cell(const std::string& row, int i) {
  std::stringstream s(row);
  std::string cell;
  for (int c = 0; c <= i; ++c) std::getline(s, cell, ',');
  return std::strtod(cell.c_str(), nullptr);
}

TEST(UpdateRatio, LogHasAColumnPerGroupThatPlotDraws) {
  TempDir d("update_ratio");
  const Result r = run_folio(words(cat("train --data ", write_small_corpus(d.path / "corpus.txt"), " --out ", d / "run",
                                       " --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 "
                                       "--eval-interval 5 --eval-iters 2 --threads 1 --quiet --max-iters 10")),
                             d.path);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(d / "run/log.csv");
  std::string header, first, last;
  std::getline(in, header);
  std::getline(in, first);
  for (std::string line; std::getline(in, line);) last = line;
  const std::vector<std::string> columns = log_columns();
  std::string expected;
  for (const std::string& c : columns) expected += (expected.empty() ? "" : ",") + c;
  EXPECT_EQ(header, expected);
  for (int g = 0; g < kParamGroups; ++g) {
    const size_t at = columns.size() - kParamGroups + size_t(g);
    EXPECT_EQ(columns[at], column_name(ParamGroup(g)));
    EXPECT_TRUE(std::isnan(log_cell(first, int(at)))) << "step 0 has no update before it";
    EXPECT_GT(log_cell(last, int(at)), 1e-6) << columns[at];
    EXPECT_LT(log_cell(last, int(at)), 1.0) << columns[at];
  }
  const Result plot = run_folio(words(cat("plot ", d / "run", " --y update_ratio_attention --out ", d / "u.svg")),
                                d.path);
  ASSERT_EQ(plot.code, 0) << plot.err;
  expect_contains(slurp(d / "u.svg"), {"update_ratio_attention"});
}

// A log begun before the ratio columns (13 columns) goes on with 13 cells a row; a new
// one has every column, the ratios in their place.
TEST(UpdateRatio, ALogBegunWithoutTheColumnsGoesOnWithout) {
  TempDir d("update_ratio_old_log");
  const std::string log = d / "log.csv";
  std::ofstream(log) << "step,train_loss,val_loss,lr,tokens_per_sec,elapsed_s,val_bpc,train_s,val_bpb,grad_norm,"
                        "clipped,skipped,rollbacks\n0,4,4,0.001,0,1,5,0,5,nan,nan,0,0\n";
  Health h;
  h.update_ratio[size_t(ParamGroup::norms)] = 0.25;
  auto cells = [](const std::string& row) { return std::count(row.begin(), row.end(), ',') + 1; };
  Progress::Options o;
  o.quiet = true, o.log_file = log, o.plot_file = d / "loss.svg";
  {
    Progress p(o, /*resume=*/true);
    p.evaluated(10, 3.5f, 3.6f, 1e-3f, 2.0, h);
  }
  std::string line, last;
  for (std::ifstream in(log); std::getline(in, line);) last = line;
  EXPECT_EQ(cells(last), 13) << last;
  {
    Progress p(o, /*resume=*/false);
    p.evaluated(10, 3.5f, 3.6f, 1e-3f, 2.0, h);
  }
  std::ifstream in(log);
  std::getline(in, line), std::getline(in, last);
  EXPECT_EQ(size_t(cells(last)), log_columns().size()) << last;
  EXPECT_EQ(log_cell(last, 0), 10);
  EXPECT_EQ(log_cell(last, int(log_columns().size()) - kParamGroups + int(ParamGroup::norms)), 0.25);
  EXPECT_TRUE(std::isnan(log_cell(last, int(log_columns().size()) - 1)));
}

}  // namespace
}  // namespace folio
