// folio export: a checkpoint as files another program runs: GGUF, llama.cpp's
// (io/gguf_model.h), or HF's GPT-2 directory (io/hf_gpt2.h); docs/export.md.
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <utility>

#include "cli/common.h"
#include "io/checkpoint.h"
#include "io/gguf_model.h"
#include "io/hf_gpt2.h"

namespace folio::cli {
namespace {

void declare(po::options_description& opts) {
  opts.add_options()("format", with_default<std::string>("gguf"), "the format: gguf (llama.cpp's file) or hf (HF's GPT-2 directory)")
      ("dtype", with_default<std::string>("f32"),
       "the matrices' type: f32, f16 or q8_0 (blocks of 32 int8 with an f16 scale; a matrix whose rows are not "
       "whole blocks is written f16); norms and biases stay f32")
      ("paths", po::value<std::vector<std::string>>()->composing(), "RUN (its model.safetensors) or a .safetensors checkpoint, then OUT.gguf (or OUT_DIR with --format hf)");
  add_overwrite(opts);
}

GgufDtype dtype_of(const std::string& text) {
  if (text == "f32") return GgufDtype::f32;
  if (text == "f16") return GgufDtype::f16;
  if (text == "q8_0") return GgufDtype::q8_0;
  throw UsageError(cat("--dtype must be f32, f16 or q8_0, got '", text, "'"));
}

// The two positional paths: the checkpoint, then `written` (what the format writes).
std::pair<std::string, std::string> checkpoint_and_output(const po::variables_map& vm, const char* written) {
  const auto paths = vm.count("paths") ? vm["paths"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (paths.size() != 2)
    throw UsageError(cat("expected two paths, the checkpoint (a run directory or a .safetensors file) and the ",
                         written, "; got ", paths.size()));
  return {paths[0], paths[1]};
}

// The checkpoint, or a usage error listing each reason `refusals` gives it no `target`.
std::shared_ptr<ModelCheckpoint> load_exportable(
    const std::string& path, const char* target,
    const std::function<std::vector<std::string>(const ModelCheckpoint&)>& refusals) {
  auto ck = std::make_shared<ModelCheckpoint>(load_model(path));
  if (const auto why = refusals(*ck); !why.empty()) {
    std::string lines;
    for (const auto& w : why) lines += "\n  " + w;
    throw UsageError(cat(ck->path, " maps to no ", target, ":", lines));
  }
  return ck;
}

void note_what_is_left_out(const nn::GPTConfig& c) {
  if (c.mtp > 0.0f) std::fprintf(stderr, "note: the multi-token head (--mtp) is not written: generation never uses it\n");
}

// --format hf: RUN OUT_DIR, HF's GPT-2 directory.
std::function<int()> prepare_hf(const po::variables_map& vm) {
  if (!vm["dtype"].defaulted()) throw UsageError("--dtype is for --format gguf; --format hf writes F32");
  const auto [checkpoint, out] = checkpoint_and_output(vm, "directory to write");
  const std::vector<std::string> files(std::begin(kHfGpt2Files), std::end(kHfGpt2Files));
  for (const std::string& f : files)
    check_not_input(out, (std::filesystem::path(out) / f).string(), model_file(checkpoint));
  check_output(vm, out, out, files);
  const auto ck = load_exportable(checkpoint, "HF GPT2LMHeadModel", [](const ModelCheckpoint& c) {
    auto why = hf_refusals(c.model->config());
    // vocab.json and merges.txt hold a byte-level BPE alone; a directory without them
    // is weights no HF tokenizer and no folio import --from-hf can use.
    if (std::string(c.tokenizer->kind()) != "bytebpe")
      why.push_back(cat("the tokenizer, ", c.tokenizer->describe(), ": GPT-2's directory holds only a byte-level BPE "
                        "(vocab.json, merges.txt), so HF and folio import --from-hf could not tokenize for it; "
                        "folio export (GGUF) writes the model with its tokenizer; a model trained with GPT-2's own "
                        "(--tokenizer DIR of its vocab.json and merges.txt) exports here"));
    // Checked here with the others (exit 2), before write_hf, whose own check would fail
    // the run after the checks.
    if (c.tokenizer->chat_tokens())
      why.push_back("a chat model (<|im_start|>, <|im_end|> and the template): GPT-2's directory has no place for "
                    "them, and vocab.json would lack the model's last two rows; the GGUF export carries them, for a "
                    "model llama.cpp's architectures can run (docs/export.md)");
    return why;
  });
  return [=] {
    for (const std::string& file : write_hf(*ck->model, *ck->tokenizer, out)) std::fprintf(stderr, "wrote %s\n", file.c_str());
    note_what_is_left_out(ck->model->config());
    return 0;
  };
}

std::function<int()> prepare(const po::variables_map& vm) {
  const std::string format = vm["format"].as<std::string>();
  if (format != "gguf" && format != "hf") throw UsageError(cat("--format must be gguf or hf, got '", format, "'"));
  if (format == "hf") return prepare_hf(vm);
  const GgufDtype dtype = dtype_of(vm["dtype"].as<std::string>());
  const auto [checkpoint, out] = checkpoint_and_output(vm, "GGUF file to write");
  check_not_input(out, out, model_file(checkpoint));
  check_output(vm, out, out);
  const auto ck = load_exportable(checkpoint, "llama.cpp architecture", [](const ModelCheckpoint& c) {
    return gguf_refusals(c.model->config(), *c.tokenizer);
  });
  const std::string name = std::filesystem::path(ck->path).parent_path().filename().string();
  auto file = std::make_shared<GgufFile>(model_to_gguf(*ck->model, *ck->tokenizer, dtype, name.empty() ? "folio" : name));
  return [=] {
    write_gguf(out, *file);
    std::fprintf(stderr, "wrote %s (GGUF, %s, %s, %zu tensors)\n", out.c_str(),
                 std::get<std::string>(file->find("general.architecture")->value).c_str(), to_string(dtype),
                 file->tensors.size());
    note_what_is_left_out(ck->model->config());
    return 0;
  };
}

}  // namespace

const Command kExport = {"export", "write a checkpoint as a GGUF file for llama.cpp or as HF's GPT-2",
                         "folio export [--format gguf] [--dtype f32|f16|q8_0] RUN|CKPT OUT.gguf\n"
                         "folio export --format hf RUN|CKPT OUT_DIR\n\n"
                         "Writes the model and its tokenizer as GGUF v3: --norm rms --activation swiglu --pos rope\n"
                         "as llama.cpp's llama (qwen3 with --qk-norm); GELU with learned positions as gpt2, with\n"
                         "--pos rope as gptneox. Options no llama.cpp graph computes are refused, each with the\n"
                         "flag that makes a model exportable (docs/export.md). --format hf writes HF's GPT-2\n"
                         "directory (config.json, model.safetensors, vocab.json, merges.txt) for a model trained\n"
                         "with --gpt2-biases, learned positions, LayerNorm and GPT-2's byte-level BPE.\n"
                         "An existing OUT is refused unless --overwrite.",
                         declare, prepare, "paths"};

}  // namespace folio::cli
