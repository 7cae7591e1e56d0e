// The pieces of a run's report (cli/report_sections.h).
#include "cli/report_sections.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "base/error.h"
#include "folio/version.h"
#include "infer/exact_match.h"
#include "io/conversation_file.h"

namespace folio::cli {

std::string shell_quoted(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") ==
                           std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string folio_commit() {
#ifdef FOLIO_COMMIT
  return std::string(FOLIO_COMMIT).empty() ? "unknown" : FOLIO_COMMIT;
#else
  return "unknown";
#endif
}

std::string fixed_text(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return out;
}

std::string file_safe(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_' ? c : '_';
  return out;
}

std::string metric_text(const Metric& m) {
  return fixed_text(m.mean, 4) + (m.standard_error ? " ± " + fixed_text(*m.standard_error, 4) : "");
}

std::string table(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string out = "| | |\n|---|---|\n";
  for (const auto& [what, value] : rows) out += "| " + cell(what) + " | " + cell(value) + " |\n";
  return out;
}

std::string fenced(const std::string& text, const std::string& language) {
  size_t longest = 0, run = 0;
  for (char c : text) run = c == '`' ? run + 1 : 0, longest = std::max(longest, run);
  const std::string fence(std::max<size_t>(3, longest + 1), '`');
  return fence + language + "\n" + text + (text.empty() || text.back() != '\n' ? "\n" : "") + fence + "\n\n";
}

std::string machine_table(const TrainConfig& config) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown", flags;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    if (key == "model name" && model == "unknown") model = line.substr(std::min(line.size(), colon + 2));
    if (key == "flags" && flags.empty()) flags = " " + line.substr(colon + 1) + " ";
  }
  const auto has = [&](const char* flag) { return flags.find(cat(" ", flag, " ")) != std::string::npos; };
  std::string isa;
  for (const auto& [flag, name] : {std::pair{"avx2", "AVX2"}, {"avx512f", "AVX-512"}, {"avx512_bf16", "AVX512-BF16"},
                                   {"amx_tile", "AMX"}})
    isa += cat(isa.empty() ? "" : ", ", name, has(flag) ? " yes" : " no");
  const unsigned cores = std::thread::hardware_concurrency();
  return table({{"CPU", model},
                {"vector instructions", flags.empty() ? "unknown (no /proc/cpuinfo)" : isa},
                {"threads", cat(config.threads > 0 ? cat(config.threads, " (the run's)") : cat(num_threads()),
                                " of ", cores, " hardware threads")},
                {"dtype", to_string(config.dtype)}}) +
         "\nThe machine that wrote this report; `folio train --report` writes it on the machine that trained.\n";
}

namespace {

// The first user message of three conversations spread over the file (a chat run's
// samples are replies), or a greeting when the file cannot be read now.
std::vector<std::string> user_prompts(const std::string& data) {
  std::vector<std::string> out;
  try {
    const std::vector<Conversation> all = read_conversations(data);
    for (size_t i = 0; i < 3 && i < all.size(); ++i)
      for (const ChatMessage& m : all[i * (all.size() - 1) / 2].messages)
        if (m.role == "user") {
          out.push_back(m.content);
          break;
        }
  } catch (const Error&) {
  }
  if (out.empty()) out.push_back("Hello!");
  return out;
}

}  // namespace

std::vector<std::string> default_prompts(const std::string& data) {
  if (is_conversation_file(data)) return user_prompts(data);
  std::ifstream in(data, std::ios::binary);
  std::string text(65536, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(std::max<std::streamsize>(in.gcount(), 0)));
  std::vector<std::string> lines;
  std::istringstream all(text);
  for (std::string line; std::getline(all, line);)
    if (line.size() >= 8) lines.push_back(line.substr(0, 24));
  if (lines.size() < 3) return {"\n"};
  std::vector<std::string> out;
  for (size_t i = 0; i < 3; ++i) {
    std::string p = lines[i * (lines.size() - 1) / 2];
    while (!p.empty() && (p.back() & 0xC0) == 0x80) p.pop_back();  // no cut character
    if (!p.empty() && (p.back() & 0x80)) p.pop_back();
    out.push_back(p);
  }
  return out;
}

std::string samples_text(const nn::GPT& model, const Tokenizer& tokenizer, const std::vector<std::string>& prompts,
                         int64_t tokens) {
  // A chat model's prompt is a user's message (prompt_tokens puts it through the template).
  const bool chat = tokenizer.chat_tokens().has_value();
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::string> refused(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    try {
      ids.push_back(prompt_tokens(tokenizer, prompts[i]));
    } catch (const Error& e) {
      refused[i] = e.what();
    }
  }
  const std::vector<Greedy> written = generate_greedy(model, tokenizer, ids, {tokens, {}, 8});
  std::string out;
  for (size_t i = 0, at = 0; i < prompts.size(); ++i) {
    if (!refused[i].empty()) {
      out += "Prompt " + cell(prompts[i]) + ": not sampled (" + cell(refused[i]) + ")\n\n";
      continue;
    }
    const std::string& reply = written[at++].text;
    out += fenced(chat ? "User: " + prompts[i] + "\nAssistant: " + reply : prompts[i] + reply);
  }
  return out;
}

}  // namespace folio::cli
