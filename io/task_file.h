#pragma once
// A task file: one item a line (JSONL). Multiple-choice items are a context, its choices
// and the index of the right one, in three layouts recognised by their fields:
//   HellaSwag's      {"ctx": "...", "endings": ["...", ...], "label": 2, ...}
//                    (hellaswag_val.jsonl as llm.c and lm-eval read it; the other
//                    fields, ind, ctx_a, activity_label..., are ignored)
//   plain            {"context": "...", "choices": ["...", ...], "answer": 1}
//   ARC's            {"question": {"stem": "...", "choices": [{"text": "...",
//                    "label": "A"}, ...]}, "answerKey": "A"}; the context is
//                    "Question: <stem>\nAnswer:", as lm-eval's arc tasks write it, and
//                    the answer is the choice whose label is answerKey ("A" or "1").
// Generative items are a prompt and the answer the model's greedy text must match:
//   plain            {"prompt": "...", "answer": "..."} (the answer may be a number)
//   GSM8K's          {"question": "...", "answer": "... #### 72"}; the prompt is
//                    "Question: <question>\nAnswer:", as lm-eval's gsm8k task writes it.
// A file holds one kind: the first item's. Blank lines are skipped. Anything else is refused: folio::Error "<path>:<line>: what"
// (malformed JSON, invalid UTF-8, none of the three layouts, a field of the wrong type,
// an empty context or choice, fewer than 2 choices, an answer that names none of them).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace folio {

struct ChoiceItem {
  std::string context;
  std::vector<std::string> choices;  // at least 2, none empty
  int64_t answer = 0;                // index into choices
  int64_t line = 0;                  // where it is in its file, from 1
};

struct GenerativeItem {
  std::string prompt;  // not empty
  std::string answer;  // not empty; compared after normalisation (infer/exact_match.h)
  int64_t line = 0;
};

struct TaskFile {
  std::string path;
  // The first item's layout: "hellaswag", "plain" or "arc" (multiple choice), "prompt"
  // or "gsm8k" (generative).
  std::string format;
  std::vector<ChoiceItem> items;            // a multiple-choice file's
  std::vector<GenerativeItem> generative;  // a generative file's
  bool is_generative() const { return !generative.empty(); }
  int64_t size() const { return int64_t(items.size() + generative.size()); }
};

// The items of the file at `path`, in order; at most `limit` of them (0: all). Lines
// after the limit are not read. A generative item in a multiple-choice file, or the
// reverse, is refused with its line.
TaskFile read_task_file(const std::string& path, int64_t limit = 0);

// One line of a task file (`line` is its number, for errors), as read_task_file reads a multiple-choice
// it; `format` is set to its layout's name.
ChoiceItem parse_choice_item(std::string_view text, const std::string& path, int64_t line, std::string& format);

}  // namespace folio
