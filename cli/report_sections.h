#pragma once
// The pieces of a run's report (cli/report.h): markdown tables and code blocks, the
// machine's description, and greedy samples.
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizer.h"
#include "infer/task_eval.h"
#include "nn/transformer.h"
#include "train/config.h"

namespace folio::cli {

std::string shell_quoted(const std::string& word);  // as a shell reads it back
std::string folio_commit();                          // the git commit folio was configured at, or "unknown"
std::string fixed_text(double v, int decimals);      // "0.2955"
std::string cell(const std::string& text);           // a table cell: one line, '|' escaped
std::string file_safe(const std::string& name);      // letters, digits, '.', '-', '_'
std::string metric_text(const Metric& m);            // "0.2955 ± 0.0046"
// A two-column table of (what, value) rows.
std::string table(const std::vector<std::pair<std::string, std::string>>& rows);
// `text` in a fenced code block whose fence no run of backticks in it can close.
std::string fenced(const std::string& text, const std::string& language = "");
// The CPU, its vector instructions (AVX2, AVX-512, AVX512-BF16, AMX), the threads
// and the run's dtype, as a table.
std::string machine_table(const TrainConfig& config);
// Three prompts from the run's text (the starts of lines a third of the way apart),
// or a newline when it is not a readable text file; of a conversation file, three
// conversations' first user messages.
std::vector<std::string> default_prompts(const std::string& data);
// Each prompt and what the model writes greedily after it, as code blocks.
std::string samples_text(const nn::GPT& model, const Tokenizer& tokenizer, const std::vector<std::string>& prompts,
                         int64_t tokens);

}  // namespace folio::cli
