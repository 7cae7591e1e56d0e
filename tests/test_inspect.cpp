// Seeing inside a model: the attention weights the GPT hands out, the pictures drawn
// from them and from loss logs, and generation's context windows and greedy decoding.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "data/tokenizer.h"
#include "base/error.h"
#include "base/atomic_file.h"
#include "infer/generator.h"
#include "viz/attention.h"
#include "viz/loss_plot.h"
#include "viz/svg.h"
#include "tests/support.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

nn::GPT small_gpt() {
  nn::GPT gpt({.vocab_size = 11, .block_size = 12, .n_layer = 2, .n_head = 3, .n_embd = 12, .seed = 7});
  gpt.eval();
  return gpt;
}

// The weights GPT::forward hands out are its own: each row a distribution over the
// keys up to the query, and each head's map what Head::forward (the per-head
// specification) computes on that layer's input.
TEST(Attention, WeightsFromTheForwardPassAreTheHeadsWeights) {
  nn::GPT gpt = small_gpt();
  NoGradGuard no_grad;
  const std::vector<int32_t> ids{3, 1, 4, 1, 5, 9, 2, 6};
  const int64_t T = int64_t(ids.size());
  std::vector<Tensor> att;
  const Tensor logits = gpt.forward(ids, 1, T, {}, &att).logits;
  ASSERT_EQ(att.size(), 2u);
  EXPECT_EQ(att[0].shape(), Shape({1, 3, T, T}));
  // Asking changes nothing but the path: the fused attention and the one that keeps
  // the weights sum in different orders, so the logits agree to rounding, not bits.
  const Tensor unasked = gpt.forward(ids, 1, T).logits;  // (1, T, V)
  for (int64_t i = 0; i < unasked.numel(); ++i)
    EXPECT_NEAR(unasked.data()[i], logits.data()[i], 2e-6f) << "logit " << i;

  // Layer l's input, rebuilt from the modules: embeddings, then the blocks before l.
  std::vector<int32_t> positions(T);
  std::iota(positions.begin(), positions.end(), 0);
  Tensor x = add(gpt.token_embedding->forward(ids, {1, T}), gpt.position_embedding->forward(positions, {T}));
  for (size_t l = 0; l < att.size(); ++l) {
    const Tensor h = gpt.blocks[l]->ln1->forward(x);
    for (int64_t head = 0; head < 3; ++head) {
      Tensor expected;
      gpt.blocks[l]->attn->heads[head]->forward(h, &expected);  // (1, T, T)
      for (int64_t q = 0; q < T; ++q) {
        double row = 0;
        for (int64_t k = 0; k < T; ++k) {
          const float w = att[l].at({0, head, q, k});
          EXPECT_NEAR(w, expected.at({0, q, k}), 1e-5f) << "layer " << l << " head " << head;
          if (k > q) {
            EXPECT_EQ(w, 0.0f) << "query " << q << " sees the later key " << k;
          }
          row += w;
        }
        EXPECT_NEAR(row, 1.0, 1e-5) << "layer " << l << " head " << head << " query " << q;
      }
    }
    x = gpt.blocks[l]->forward(x);
  }
}

TEST(Attention, TableShowsLabelsAndThreeDecimals) {
  const viz::AttentionMap map{"layer 0, head 1", 2, {1.0f, 0.0f, 0.25f, 0.75f}};
  const std::string table = viz::attention_table({"a", visible_token("\n")}, map);
  EXPECT_EQ(table,
            "layer 0, head 1 (rows: queries, columns: keys)\n"
            "           a    \\n\n"
            "     a 1.000 0.000\n"
            "    \\n 0.250 0.750\n");
}

// Runs Python's XML parser on `file` (Debian's python3: scripts/setup.sh installs it).
void expect_valid_svg(const fs::path& file) {
  if (std::system("/usr/bin/python3 -c '' 2>/dev/null") != 0) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string cmd = "/usr/bin/python3 -c \"import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1])"
                          ".getroot(); sys.exit(r.tag != '{http://www.w3.org/2000/svg}svg')\" " + file.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << file << " is not a well-formed SVG document";
}

// A fresh directory of this file's tests.
struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("inspect") {}
};

TEST(Attention, SvgGridIsWellFormedWhateverTheLabels) {
  TempDir dir;
  std::vector<viz::AttentionMap> maps;
  for (int h = 0; h < 4; ++h) maps.push_back({"layer 0, head " + std::to_string(h), 5, std::vector<float>(25, 0.2f)});
  // Characters XML reserves or forbids must come out escaped or replaced.
  const std::string svg = viz::attention_grid_svg({"<", "&", "\"", "\x01", "\xC3\xA9"}, maps, 2);
  EXPECT_NE(svg.find("&lt;"), std::string::npos);
  EXPECT_EQ(svg.find('\x01'), std::string::npos);
  write_file_atomic((dir.path / "a.svg").string(), svg);
  expect_valid_svg(dir.path / "a.svg");
}

// Labels and names that are UTF-8 but not XML text (U+FFFE and U+FFFF, characters of a
// char vocabulary trained on any text), or not UTF-8 at all (a run directory named in
// Latin-1): each becomes U+FFFD, and the documents still parse. Both once stopped the
// parser at the first of them.
TEST(Attention, SvgsHoldOnlyXmlTextWhateverTheBytes) {
  TempDir dir;
  const std::vector<std::string> labels{"\xEF\xBF\xBF", "\xEF\xBF\xBE", "\xFF", "\xC3", "\xED\xA0\x80", "\xC0\xAF",
                                        "\xEF\xBF\xBD\xE6\x97\xA5"};
  const std::vector<viz::AttentionMap> maps{{"layer 0, head 0", 7, std::vector<float>(49, 0.1f)}};
  const std::string svg = viz::attention_grid_svg(labels, maps, 1);
  for (const char* bad : {"\xEF\xBF\xBF", "\xEF\xBF\xBE", "\xFF", "\xED\xA0\x80", "\xC0\xAF"})
    EXPECT_EQ(svg.find(bad), std::string::npos) << "raw bytes of " << ::testing::PrintToString(std::string(bad));
  EXPECT_NE(svg.find(">\xEF\xBF\xBD\xE6\x97\xA5</text>"), std::string::npos);  // valid text is kept as it is
  write_file_atomic((dir.path / "a.svg").string(), svg);
  expect_valid_svg(dir.path / "a.svg");
  EXPECT_EQ(viz::xml_escape("caf\xE9 \xEF\xBF\xBF<"), "caf\xEF\xBF\xBD \xEF\xBF\xBD&lt;");

  const viz::LossCurve latin1{"caf\xE9", {{0, 4.0, 4.1, 0}, {100, 2.0, 2.1, 50}}};
  write_file_atomic((dir.path / "loss.svg").string(), viz::loss_plot_svg({latin1}));
  expect_valid_svg(dir.path / "loss.svg");
}

TEST(LossPlot, ReadsLogsDrawsThemAndNamesBadLines) {
  TempDir dir;
  const fs::path log = dir.path / "log.csv";
  std::ofstream(log) << "step,train_loss,val_loss,lr,tokens_per_sec,elapsed_s\n0,4.2,4.3,0,0,0.5\n"
                        "100,2.5,2.6,0.001,9000,61\n200,2.0,2.2,0.0005,9100,122\n";
  const viz::LossCurve curve = viz::read_loss_log(log.string(), "run <a>");
  ASSERT_EQ(curve.points.size(), 3u);
  EXPECT_EQ(curve.points[2].step, 200);
  EXPECT_DOUBLE_EQ(curve.points[1].val, 2.6);
  const std::string svg = viz::loss_plot_svg({curve, {"b", {{0, 4.0, 4.1, 0}, {200, 1.9, 2.0, 100}}}});
  EXPECT_NE(svg.find("best val 2.2 at step 200"), std::string::npos) << svg;
  EXPECT_NE(svg.find("2m02s"), std::string::npos);  // wall time under the step axis
  write_file_atomic((dir.path / "loss.svg").string(), svg);
  expect_valid_svg(dir.path / "loss.svg");

  std::ofstream(log, std::ios::app) << "300,oops\n";
  try {
    viz::read_loss_log(log.string(), "x");
    FAIL() << "a broken line was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(log.string() + ":5:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(viz::read_loss_log((dir.path / "nope.csv").string(), "x"), Error);
}

// A loss log of today's columns with these rows, read back as the curve `name`.
viz::LossCurve read_log(const TempDir& dir, const std::string& rows, const std::string& name) {
  const fs::path log = dir.path / "log.csv";
  std::ofstream(log) << "step,train_loss,val_loss,lr,tokens_per_sec,elapsed_s,val_bpc,train_s,val_bpb\n" << rows;
  return viz::read_loss_log(log.string(), name);
}

// --x time: each run at its own training seconds (train_s), so a run that steps half as
// fast reaches the same point of the axis at half the steps.
TEST(LossPlot, TimeAxisUsesTheTrainingSeconds) {
  TempDir dir;
  const viz::LossCurve curve = read_log(dir, "0,4.2,4.3,0,0,0.5,6.2,0,6.2\n100,2.5,2.6,0.001,9000,70,3.7,60,3.7\n", "a");
  EXPECT_DOUBLE_EQ(curve.points[1].train_s, 60.0);
  const viz::LossCurve slower{"b", {{0, 4.0, 4.1, 0, 0}, {50, 2.0, 2.1, 70, 60}}};
  const std::string svg = viz::loss_plot_svg({curve, slower}, viz::PlotAxis::time);
  EXPECT_NE(svg.find("loss against training time"), std::string::npos);
  EXPECT_NE(svg.find("1m00s"), std::string::npos) << svg;  // the axis ticks are durations
  // Both runs' last points sit at the same x, 60 s, though one is step 100 and the
  // other step 50. Each curve is two polylines (train, val) of one point here.
  const std::string svg2 = viz::loss_plot_svg({viz::LossCurve{"a", {curve.points[1]}}, viz::LossCurve{"b", {slower.points[1]}}},
                                                viz::PlotAxis::time);
  std::vector<std::string> xs;
  for (size_t at = svg2.find(" points=\""); at != std::string::npos; at = svg2.find(" points=\"", at + 1)) {
    const size_t from = at + 9;
    xs.push_back(svg2.substr(from, svg2.find(',', from) - from));
  }
  ASSERT_EQ(xs.size(), 4u) << svg2;
  EXPECT_EQ(xs[1], xs[3]);
  EXPECT_NE(viz::loss_plot_svg({viz::LossCurve{"a", {curve.points[1]}}, viz::LossCurve{"b", {slower.points[1]}}},
                                      viz::PlotAxis::step), svg2);
  EXPECT_THROW(read_log(dir, "0,4.2,4.3,0,0,0.5,6.2,0,6.2\n200,2.0,2.2,0.0005,9100,140,3.1,oops,3.1\n", "x"), Error);
}

// Under a step tick between two evaluations, the wall time there: the straight line
// between their times, not the time of the evaluation after it.
TEST(LossPlot, TickTimesBetweenEvaluationsAreInterpolated) {
  const viz::LossCurve curve{"a", {{0, 4.0, 4.1, 0}, {1000, 2.0, 2.1, 1000}, {1500, 1.9, 2.0, 1600}}};
  EXPECT_DOUBLE_EQ(viz::elapsed_at(curve, 200), 200);
  EXPECT_DOUBLE_EQ(viz::elapsed_at(curve, 1000), 1000);
  EXPECT_DOUBLE_EQ(viz::elapsed_at(curve, 1250), 1300);
  EXPECT_DOUBLE_EQ(viz::elapsed_at(curve, 2000), 1600);
  const std::string svg = viz::loss_plot_svg({curve});
  // Ticks every 200 steps: step 200 came at 3m20s, and step 1400 at 1000 + 0.8 * 600 s.
  for (const char* label : {">3m20s<", ">6m40s<", ">10m00s<", ">13m20s<", ">16m40s<", ">24m40s<"})
    EXPECT_NE(svg.find(label), std::string::npos) << label << "\n" << svg;
}

// --y bpb: val in bits per byte (the log's val_bpb) and train at the same ratio, so a
// char run and a BPE run are drawn on one scale; a log without the column is refused.
TEST(LossPlot, BitsPerByteAxis) {
  TempDir dir;
  // A BPE run: 0.3 tokens a byte, so loss 4.0 is 4.0 * 0.3 / ln 2 = 1.731 bits per byte.
  const viz::LossCurve bpe = read_log(dir, "0,6.0,6.2,0,0,0.5,2.7,0,2.683\n100,3.8,4.0,0.001,9000,70,1.74,60,1.731\n", "bpe");
  EXPECT_DOUBLE_EQ(bpe.points[1].val_bpb, 1.731);
  ASSERT_TRUE(viz::has_bits_per_byte(bpe));
  viz::LossCurve chars{"char", {{0, 4.1, 4.2, 0}, {100, 1.3, 1.4, 50}}};
  chars.points[0].val_bpb = 4.2 / std::log(2.0), chars.points[1].val_bpb = 1.4 / std::log(2.0);
  const std::string svg = viz::loss_plot_svg({bpe, chars}, viz::PlotAxis::step, viz::PlotValue::bpb);
  for (const char* text : {"bits per byte against step", "bpe: best val 1.731 bits/byte", "char: best val 2.02 bits/byte"})
    EXPECT_NE(svg.find(text), std::string::npos) << text << "\n" << svg;
  // The BPE run alone spans 1.644 bits per byte (its last train loss, 3.8 * 1.731 / 4.0)
  // to 2.683: the vertical axis's ticks go from 1.6 to 2.6, where its losses (3.8 to
  // 6.2) would have had 4 to 6.
  const std::string one = viz::loss_plot_svg({bpe}, viz::PlotAxis::step, viz::PlotValue::bpb);
  for (const char* tick : {">1.6<", ">2.6<"}) EXPECT_NE(one.find(tick), std::string::npos) << tick << "\n" << one;
  EXPECT_EQ(one.find(">4<"), std::string::npos) << one;
  const fs::path log = dir.path / "old.csv";
  std::ofstream(log) << "step,train_loss,val_loss,lr,tokens_per_sec,elapsed_s\n0,4.2,4.3,0,0,0.5\n";
  const viz::LossCurve old = viz::read_loss_log(log.string(), "old");
  EXPECT_FALSE(viz::has_bits_per_byte(old));
  testing::expect_error([&] { viz::loss_plot_svg({old}, viz::PlotAxis::step, viz::PlotValue::bpb); },
                        {"old: its log has no val_bpb"});
}

// The texts of `svg`'s <text> elements whose attributes hold `attribute`: the vertical
// axis's tick labels are the ones anchored at their end.
std::vector<std::string> texts(const std::string& svg, const std::string& attribute) {
  std::vector<std::string> out;
  for (size_t at = svg.find("<text "); at != std::string::npos; at = svg.find("<text ", at + 1)) {
    const size_t close = svg.find('>', at), end = svg.find("</text>", close);
    if (svg.substr(at, close - at).find(attribute) != std::string::npos) out.push_back(svg.substr(close + 1, end - close - 1));
  }
  return out;
}

// Every tick reads as its own value: a loss that moved by 0.002 had ticks 0.005 apart
// labelled 1.49, 1.49, 1.5, 1.5 (three significant digits), a run of three seconds had
// seconds ticks 0s 1s 1s 2s 2s 3s, and a column from 0 (tokens_per_sec) a tick at -0.
TEST(LossPlot, TickLabelsTellTheTicksApart) {
  TempDir dir;
  const viz::LossCurve flat =
      read_log(dir, "0,1.502,1.504,0,0,0.5,2,0,2\n100,1.501,1.503,0.001,9000,1.7,2,1.2,2\n200,1.5,1.5025,0,9000,3.4,2,3.1,2\n", "a");
  const auto distinct = [](std::vector<std::string> labels) {
    std::sort(labels.begin(), labels.end());
    return std::adjacent_find(labels.begin(), labels.end()) == labels.end();
  };
  const std::vector<std::string> loss = texts(viz::loss_plot_svg({flat}), "text-anchor=\"end\"");
  EXPECT_TRUE(distinct(loss)) << ::testing::PrintToString(loss);
  EXPECT_NE(std::find(loss.begin(), loss.end(), "1.495"), loss.end()) << ::testing::PrintToString(loss);
  const std::string clock = viz::loss_plot_svg({flat}, viz::PlotAxis::time);
  std::vector<std::string> seconds = texts(clock, "font-size=\"11\" text-anchor=\"middle\"");
  EXPECT_TRUE(distinct(seconds)) << ::testing::PrintToString(seconds);
  EXPECT_NE(std::find(seconds.begin(), seconds.end(), "0.5s"), seconds.end()) << ::testing::PrintToString(seconds);
  viz::LossCurve speed = flat;
  for (size_t i = 0; i < speed.points.size(); ++i) speed.points[i].column = 50000.0 * double(i);
  const std::vector<std::string> tokens = texts(
      viz::loss_plot_svg({speed}, viz::PlotAxis::step, viz::PlotValue::column, "tokens_per_sec"), "text-anchor=\"end\"");
  EXPECT_NE(std::find(tokens.begin(), tokens.end(), "0"), tokens.end()) << ::testing::PrintToString(tokens);
  EXPECT_EQ(std::find(tokens.begin(), tokens.end(), "-0"), tokens.end()) << ::testing::PrintToString(tokens);
}

// A column far below 0.01 (the lr, an update ratio) fills the plot's height, as a loss
// does; it was drawn in a band of 0.02 around it, a flat line.
TEST(LossPlot, ASmallColumnFillsThePlot) {
  viz::LossCurve lr{"a", {{0, 4, 4, 0}, {10, 3, 3, 1}, {20, 2, 2, 2}}};
  lr.points[0].column = 3e-4, lr.points[1].column = 6e-4, lr.points[2].column = 1e-4;
  const std::string svg = viz::loss_plot_svg({lr}, viz::PlotAxis::step, viz::PlotValue::column, "lr");
  // The val polyline (the second: the train one is empty for a column): its y extent.
  const size_t points = svg.find(" points=\"", svg.find(" points=\"") + 1);
  ASSERT_NE(points, std::string::npos) << svg;
  std::istringstream xy(svg.substr(points + 9, svg.find('"', points + 9) - points - 9));
  double lo = 1e9, hi = -1e9;
  for (std::string pair; xy >> pair;) {
    const double y = std::stod(pair.substr(pair.find(',') + 1));
    lo = std::min(lo, y), hi = std::max(hi, y);
  }
  EXPECT_GT(hi - lo, 250) << svg;  // of the 348 between the frame's top and bottom
  EXPECT_NE(texts(svg, "text-anchor=\"end\"").size(), 0u);
}

// Greedy tokens generated with the cache, and with `shift`, against a plain reference:
// the model run on the context the rule describes, recomputed from scratch each time.
std::vector<int32_t> reference_greedy(const nn::GPT& gpt, std::vector<int32_t> context, int64_t shift, int n) {
  NoGradGuard no_grad;
  const int64_t block = gpt.config().block_size, V = gpt.config().vocab_size;
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const Tensor logits = gpt.forward(context, 1, int64_t(context.size())).logits;
    const float* row = logits.data() + logits.numel() - V;
    const int32_t next = int32_t(std::max_element(row, row + V) - row);
    out.push_back(next);
    context.push_back(next);
    if (int64_t(context.size()) > block) context.erase(context.begin(), context.begin() + shift);
  }
  return out;
}

TEST(Generate, ContextShiftsAreExactWithAndWithoutTheCache) {
  nn::GPT gpt = small_gpt();
  const std::vector<int32_t> prompt{1, 2, 3};
  for (int64_t shift : {0, 1, 5, 12}) {
    const int64_t effective = shift ? shift : 6;  // 0: block_size / 2
    const auto expected = reference_greedy(gpt, prompt, effective, 50);
    for (bool cache : {true, false}) {
      SampleOptions o{.max_new_tokens = 50, .greedy = true, .kv_cache = cache, .context_shift = shift};
      std::vector<int32_t> got;
      Rng rng(1);
      generate(gpt, prompt, o, rng, [&](int32_t id) { got.push_back(id); });
      EXPECT_EQ(got, expected) << "shift " << shift << (cache ? " with" : " without") << " the cache";
    }
  }
}

TEST(Generate, GreedyTakesTheMostLikelyAndDrawsNothing) {
  const std::vector<float> logits{0.1f, 3.0f, 3.0f, -1.0f};
  std::vector<std::pair<float, int32_t>> scratch;
  Rng rng(5), untouched(5);
  SampleOptions greedy{.greedy = true};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(sample_token(logits, greedy, rng, scratch), 1);  // first of a tie
  EXPECT_EQ(rng.uniform(), untouched.uniform());
  SampleOptions frozen{.temperature = 0.0f};
  try {
    frozen.validate();
    FAIL() << "temperature 0 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--greedy"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace folio
