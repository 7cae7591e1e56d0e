// folio import: a GGUF file folio exported back into a run directory that generate,
// eval, serve and train --init-from read (io/gguf_model.h).
#include <cstdio>
#include <filesystem>

#include "cli/common.h"
#include "io/checkpoint.h"
#include "io/gguf_model.h"
#include "nn/model_options.h"

namespace folio::cli {
namespace {

void declare(po::options_description& opts) {
  opts.add_options()("from", po::value<std::string>(), "the GGUF file to read")
      ("out", po::value<std::vector<std::string>>()->composing(), "the run directory to write (its model.safetensors)");
}

std::function<int()> prepare(const po::variables_map& vm) {
  if (!vm.count("from")) throw UsageError("--from FILE.gguf is required: the GGUF file to import");
  const auto outs = vm.count("out") ? vm["out"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (outs.size() != 1) throw UsageError(cat("expected one run directory to write, got ", outs.size()));
  const std::string from = vm["from"].as<std::string>(), dir = outs[0];
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) throw UsageError(cat(dir, ": exists and is not a directory"));
  if (fs::exists(fs::path(dir) / "model.safetensors", ec))
    throw UsageError(cat(dir, " already holds a model.safetensors; import into a new directory"));
  auto imported = std::make_shared<ImportedModel>(model_from_gguf(read_gguf(from), from));
  return [=] {
    fs::create_directories(dir);
    const std::string file = model_file(dir);
    save_model(file, *imported->model, *imported->tokenizer, 0);
    std::fprintf(stderr, "wrote %s (%s, %s)\n", file.c_str(), nn::options_as_flags(imported->model->config()).c_str(),
                 imported->tokenizer->describe().c_str());
    return 0;
  };
}

}  // namespace

const Command kImport = {"import", "read a GGUF file folio exported into a run directory",
                         "folio import OUT_RUN --from MODEL.gguf\n\n"
                         "Reads a gpt2, gptneox, llama or qwen3 GGUF that folio export wrote (f32, f16 or q8_0,\n"
                         "dequantized) and writes OUT_RUN/model.safetensors, which generate, eval, serve and\n"
                         "train --init-from use.",
                         declare, prepare, "out"};

}  // namespace folio::cli
