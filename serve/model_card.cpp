#include "serve/model_card.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/run_dir.h"

namespace folio::serve {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr size_t kMaxPromptBytes = 200;

// The run's training options from DIR/state.safetensors's header alone: the file's
// tensors (the optimizer's moments, twice the model) are never read.
std::string training_data(const fs::path& dir) {
  std::ifstream in(RunDir(dir.string()).state_file(), std::ios::binary);
  unsigned char size[8];
  if (!in.read(reinterpret_cast<char*>(size), 8)) return "";
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | size[i];
  if (n > (uint64_t(1) << 24)) return "";
  std::string header(n, '\0');
  if (!in.read(header.data(), std::streamsize(n))) return "";
  const json h = json::parse(header, nullptr, false);
  if (!h.is_object() || !h.contains("__metadata__") || !h["__metadata__"].contains("train_config")) return "";
  const json& config_text = h["__metadata__"]["train_config"];
  if (!config_text.is_string()) return "";
  const json config = json::parse(config_text.get<std::string>(), nullptr, false);
  return config.is_object() && config.contains("data") && config["data"].is_string() ? config["data"].get<std::string>()
                                                                                     : "";
}

// The first line of the file, when the tokenizer reads all of it; else "".
std::string first_line(const std::string& file, const Tokenizer& tokenizer) {
  std::error_code ec;
  if (file.empty() || !fs::is_regular_file(file, ec)) return "";
  std::ifstream in(file, std::ios::binary);
  std::string line;
  if (!std::getline(in, line)) return "";
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty() || line.size() > kMaxPromptBytes) return "";
  try {
    if (tokenizer.encode(line + "\n").empty()) return "";
  } catch (const std::exception&) {
    return "";  // not this model's text after all (a char vocabulary without its characters)
  }
  return line + "\n";
}

}  // namespace

ModelCard model_card(const std::string& checkpoint, const ModelCheckpoint& ck) {
  ModelCard card;
  std::error_code ec;
  fs::path path = fs::absolute(checkpoint, ec).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();  // "runs/x/"
  fs::path run;                                            // "" when not in a run directory
  if (fs::is_directory(path, ec)) run = path;
  else if (RunDir(path.parent_path().string()).holds_run()) run = path.parent_path();
  card.name = !run.empty() ? run.filename().string() : path.stem().string();

  struct stat st {};
  if (::stat(ck.path.c_str(), &st) == 0) card.created = int64_t(st.st_mtime);

  if (!run.empty()) {
    const std::string data = training_data(run);
    card.prompt = first_line(data, *ck.tokenizer);
    if (!card.prompt.empty()) card.prompt_from = data;
  }
  if (card.prompt.empty()) card.prompt.assign(1, '\n');
  return card;
}

}  // namespace folio::serve
