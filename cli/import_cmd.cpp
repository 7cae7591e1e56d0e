// folio import: a GGUF file (folio's own export, or a llama-family file made elsewhere;
// io/gguf_model.h), or an HF GPT-2 directory
// (io/hf_gpt2.h), into a run directory that generate, eval, serve and train
// --init-from read.
#include <cstdio>
#include <filesystem>

#include "cli/common.h"
#include "io/checkpoint.h"
#include "io/gguf_model.h"
#include "io/hf_gpt2.h"
#include "io/run_dir.h"
#include "nn/model_options.h"

namespace folio::cli {
namespace {

void declare(po::options_description& opts) {
  opts.add_options()("from", po::value<std::string>(), "the GGUF file to read")
      ("from-hf", po::value<std::string>(), "an HF GPT-2 directory to read (config.json, model.safetensors, vocab.json, merges.txt)")
      ("out", po::value<std::vector<std::string>>()->composing(), "the run directory to write (its model.safetensors)");
  add_overwrite(opts);
}

std::function<int()> prepare(const po::variables_map& vm) {
  if (vm.count("from") == vm.count("from-hf"))
    throw UsageError("give one of --from FILE.gguf (a GGUF file) and --from-hf DIR (HF's GPT-2 directory)");
  const auto outs = vm.count("out") ? vm["out"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (outs.size() != 1) throw UsageError(cat("expected one run directory to write, got ", outs.size()));
  const bool hf = vm.count("from-hf");
  const std::string from = vm[hf ? "from-hf" : "from"].as<std::string>(), dir = outs[0];
  namespace fs = std::filesystem;
  // A run's files (io/run_dir.h), as folio train refuses them: the import replaces the
  // whole run, so none of the old one is left to pair with the new weights.
  const RunDir run(dir);
  std::vector<std::string> run_files;
  for (const std::string& f : run.files()) run_files.push_back(fs::path(f).filename().string());
  // The import removes or replaces each of the run's files: none may be what it reads.
  std::vector<std::string> inputs = {from};
  if (hf) {
    inputs.clear();
    for (const char* f : kHfGpt2Files)
      inputs.push_back((fs::path(from) / f).string());
  }
  for (const std::string& f : run.files())
    for (const std::string& input : inputs) check_not_input(dir, f, input);
  check_output(vm, dir, dir, run_files);
  auto imported = std::make_shared<ImportedModel>(hf ? model_from_hf(from) : model_from_gguf(read_gguf(from), from));
  return [=] {
    fs::create_directories(dir);
    // The old weights stay until the new ones replace them whole (save_model).
    for (const std::string& f : run.files())
      if (f != run.model_file()) fs::remove(f);
    const std::string file = run.model_file();
    save_model(file, *imported->model, *imported->tokenizer, 0);
    std::fprintf(stderr, "wrote %s (%s, %s)\n", file.c_str(), nn::options_as_flags(imported->model->config()).c_str(),
                 imported->tokenizer->describe().c_str());
    return 0;
  };
}

}  // namespace

const Command kImport = {"import", "read a GGUF file, or HF's GPT-2, into a run directory",
                         "folio import OUT_RUN --from MODEL.gguf\n"
                         "folio import OUT_RUN --from-hf HF_GPT2_DIR\n\n"
                         "Reads a gpt2, gptneox, llama or qwen3 GGUF (f32, f16 or q8_0, dequantized) that folio\n"
                         "export wrote, or one made elsewhere with llama.cpp's SentencePiece-style vocabulary\n"
                         "(tokenizer.ggml.model \"llama\"; docs/export.md), or an HF GPT-2 directory (config.json, model.safetensors in F32, vocab.json\n"
                         "and merges.txt; docs/gpt2.md), and writes OUT_RUN/model.safetensors, which generate,\n"
                         "eval, serve and train --init-from use. A run already in OUT_RUN is refused unless\n"
                         "--overwrite, which replaces it.",
                         declare, prepare, "out"};

}  // namespace folio::cli
