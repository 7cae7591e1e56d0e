// folio attention: what a trained model attends to, for a prompt: the causal
// attention weights of its own forward pass, as text tables or an SVG grid.
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli/common.h"
#include "data/attention_prompt.h"
#include "io/checkpoint.h"
#include "viz/attention.h"

namespace folio::cli {
namespace {

void declare(po::options_description& opts) {
  add_checkpoint(opts);
  opts.add_options()("prompt", po::value<std::string>()->required(),
                     cat("text to look at; ", kEscapesHelp, ". A longer prompt than the model's context "
                         "(block_size tokens) is shown by its last block_size tokens").c_str())
      ("layer", with_default<int64_t>(-1), "the layer to show (-1: every layer)")
      ("head", with_default<int64_t>(-1), "the head to show (-1: every head)")
      ("format", with_default<std::string>("table"),
       "table (text, 3 decimals) or svg (heatmaps, layers x heads); an --out FILE.svg is svg unless --format says")
      ("out", po::value<std::string>(), "write to this file (default: standard output)");
  add_overwrite(opts);
  add_threads(opts);
}

// -1 (all) or an index below `count`.
int64_t choice(const po::variables_map& vm, const char* name, int64_t count) {
  const int64_t v = vm[name].as<int64_t>();
  if (v < -1 || v >= count)
    throw UsageError(cat("--", name, " must be -1 (all) or in [0, ", count, "), got ", v));
  return v;
}

std::function<int()> prepare(const po::variables_map& vm) {
  apply_threads(vm);
  // An --out named .svg gets an SVG: a text table under that name wrote a file no
  // browser or XML parser reads, and said it wrote it.
  const std::string out = vm.count("out") ? vm["out"].as<std::string>() : "";
  const bool svg_file = std::filesystem::path(out).extension() == ".svg";
  const std::string format = vm["format"].defaulted() && svg_file ? "svg" : vm["format"].as<std::string>();
  if (format != "table" && format != "svg") throw UsageError(cat("--format must be table or svg, got '", format, "'"));
  auto ck = std::make_shared<ModelCheckpoint>(load_model(checkpoint_option(vm)));
  ck->model->eval();
  const nn::GPTConfig& c = ck->model->config();
  const int64_t layer = choice(vm, "layer", c.n_layer), head = choice(vm, "head", c.n_head);
  std::vector<int32_t> ids;
  try {
    ids = ck->tokenizer->encode(unescaped(vm["prompt"].as<std::string>()));
  } catch (const Error& e) {
    throw UsageError(cat("--prompt: ", e.what()));
  }
  if (ids.empty()) throw UsageError("--prompt is empty: give at least one character of text to look at");
  // A model imported from a llama-family GGUF expects its BOS first, and a prompt
  // longer than the context is seen by its last block_size tokens (attention_ids, as
  // the Python module's attention and the page's).
  int64_t dropped = 0;
  ids = attention_ids(*ck->tokenizer, std::move(ids), c.block_size, &dropped);
  if (dropped > 0)
    warn(cat("--prompt has ", int64_t(ids.size()) + dropped, " tokens and the model's context is ", c.block_size, ": showing the last ", c.block_size));
  if (!out.empty()) check_output(vm, "--out " + out, out);
  return [=] {
    NoGradGuard no_grad;
    const int64_t T = int64_t(ids.size());
    std::vector<Tensor> attention;  // per layer (1, n_head, T, T)
    ck->model->forward(ids, 1, T, {}, &attention);
    std::vector<std::string> labels;
    for (int32_t id : ids) labels.push_back(attention_label(*ck->tokenizer, id));  // the BOS as <bos>
    std::vector<viz::AttentionMap> maps;
    for (int64_t l = 0; l < c.n_layer; ++l)
      for (int64_t h = 0; h < c.n_head; ++h) {
        if ((layer >= 0 && l != layer) || (head >= 0 && h != head)) continue;
        const float* w = attention[size_t(l)].data() + h * T * T;
        maps.push_back({cat("layer ", l, ", head ", h), T, std::vector<float>(w, w + T * T)});
      }
    std::string text;
    if (format == "svg") {
      text = viz::attention_grid_svg(labels, maps, head >= 0 ? 1 : int(c.n_head));
    } else {
      for (size_t m = 0; m < maps.size(); ++m) {
        if (m) text += '\n';
        text += viz::attention_table(labels, maps[m]);
      }
    }
    write_output(out, text, plural(int64_t(maps.size()), "head"));
    return 0;
  };
}

}  // namespace

const Command kAttention = {"attention", "show what a model attends to, as tables or an SVG grid",
                            "Runs the model on --prompt and shows the causal attention weights of its\n"
                            "forward pass (after the softmax, as used; no dropout): rows are queries, columns\n"
                            "keys, labelled with the prompt's tokens (\\n: newline, \xE2\x90\xA3: space, <0xNN>: a byte\n"
                            "that is part of a character). A model imported from a GGUF that asks for a BOS\n"
                            "token before every prompt gets it first, as folio generate puts it (<bos>).",
                            declare, prepare};

}  // namespace folio::cli
