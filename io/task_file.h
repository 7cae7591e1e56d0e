#pragma once
// A multiple-choice task file: one item a line (JSONL), each a context, its choices and
// the index of the right one. Three layouts are recognised by their fields:
//   HellaSwag's      {"ctx": "...", "endings": ["...", ...], "label": 2, ...}
//                    (hellaswag_val.jsonl as llm.c and lm-eval read it; the other
//                    fields, ind, ctx_a, activity_label..., are ignored)
//   plain            {"context": "...", "choices": ["...", ...], "answer": 1}
//   ARC's            {"question": {"stem": "...", "choices": [{"text": "...",
//                    "label": "A"}, ...]}, "answerKey": "A"}; the context is
//                    "Question: <stem>\nAnswer:", as lm-eval's arc tasks write it, and
//                    the answer is the choice whose label is answerKey ("A" or "1").
// Blank lines are skipped. Anything else is refused: folio::Error "<path>:<line>: what"
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

struct ChoiceTask {
  std::string path;
  std::string format;  // the first item's: "hellaswag", "plain" or "arc"
  std::vector<ChoiceItem> items;
};

// The items of the file at `path`, in order; at most `limit` of them (0: all). Lines
// after the limit are not read.
ChoiceTask read_choice_task(const std::string& path, int64_t limit = 0);

// One line of a task file (`line` is its number, for errors), as read_choice_task reads
// it; `format` is set to its layout's name.
ChoiceItem parse_choice_item(std::string_view text, const std::string& path, int64_t line, std::string& format);

}  // namespace folio
