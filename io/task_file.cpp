// Reading task files (io/task_file.h): which layout a line is in is
// told by its fields, and every way a line can be wrong is named with its line number.
#include "io/task_file.h"

#include <string_view>

#include "base/error.h"
#include "data/tokenizer.h"
#include "io/json.h"
#include "io/json_lines.h"

namespace folio {
namespace {

constexpr const char* kLayouts =
    "HellaSwag's (ctx, endings, label), plain (context, choices, answer), ARC's (question.stem, "
    "question.choices[].text/label, answerKey), generative (prompt, answer) or GSM8K's (question, answer)";

const Json& field(const Json& object, std::string_view name, const char* layout, const JsonLine& at) {
  const Json* v = object.find(name);
  if (!v) at.fail(layout, " item without \"", name, "\"");
  return *v;
}

const std::string& text_field(const Json& v, const std::string& name, const JsonLine& at) {
  if (!v.is_string()) at.fail(name, " must be a string, got ", v.type_name());
  return v.as_string();
}

// An index given as an integer, or as the text of one ("2", as some copies of HellaSwag
// hold it).
int64_t index_field(const Json& v, const std::string& name, const JsonLine& at) {
  if (v.is_int()) return v.as_int();
  if (v.is_string() && !v.as_string().empty() && v.as_string().size() < 10 &&
      v.as_string().find_first_not_of("0123456789") == std::string::npos)
    return std::stoll(v.as_string());
  at.fail(name, " must be an integer (the right choice's index, from 0), got ",
          v.is_string() ? json_quote(v.as_string()) : std::string(v.type_name()));
}

std::vector<std::string> string_list(const Json& v, const std::string& name, const JsonLine& at) {
  if (!v.is_array()) at.fail(name, " must be an array of strings, got ", v.type_name());
  std::vector<std::string> out;
  for (const Json& s : v.as_array()) out.push_back(text_field(s, cat(name, "[", out.size(), "]"), at));
  return out;
}

// HellaSwag's layout and the plain one: a context, the choices and the answer's index,
// each in a field of its own.
ChoiceItem three_fields(const Json& j, const char* layout, const char* context, const char* choices,
                        const char* answer, const JsonLine& at) {
  ChoiceItem item;
  item.context = text_field(field(j, context, layout, at), context, at);
  item.choices = string_list(field(j, choices, layout, at), choices, at);
  item.answer = index_field(field(j, answer, layout, at), answer, at);
  return item;
}

ChoiceItem arc(const Json& j, const JsonLine& at) {
  const Json& q = field(j, "question", "an ARC", at);
  if (!q.is_object()) at.fail("question must be an object (stem, choices), got ", q.type_name());
  ChoiceItem item;
  item.context = "Question: " + text_field(field(q, "stem", "an ARC", at), "question.stem", at) + "\nAnswer:";
  const Json& choices = field(q, "choices", "an ARC", at);
  if (!choices.is_array()) at.fail("question.choices must be an array, got ", choices.type_name());
  std::vector<std::string> labels;
  for (const Json& c : choices.as_array()) {
    const std::string name = cat("question.choices[", labels.size(), "]");
    if (!c.is_object()) at.fail(name, " must be an object (text, label), got ", c.type_name());
    item.choices.push_back(text_field(field(c, "text", "an ARC", at), name + ".text", at));
    labels.push_back(text_field(field(c, "label", "an ARC", at), name + ".label", at));
  }
  const std::string& key = text_field(field(j, "answerKey", "an ARC", at), "answerKey", at);
  item.answer = -1;
  for (size_t i = 0; i < labels.size() && item.answer < 0; ++i)
    if (labels[i] == key) item.answer = int64_t(i);
  if (item.answer < 0) {
    std::string shown;
    for (const std::string& l : labels) shown += cat(shown.empty() ? "" : ", ", json_quote(l));
    at.fail("answerKey ", json_quote(key), " is none of the choices' labels (", shown, ")");
  }
  return item;
}

ChoiceItem choice_item(const Json& j, const JsonLine& at, std::string& format);

// A prompt and its answer: {"prompt", "answer"}, or GSM8K's {"question", "answer"}
// whose question is text (ARC's is an object).
bool is_generative(const Json& j) {
  const Json* q = j.find("question");
  return j.find("prompt") || (q && q->is_string());
}

GenerativeItem generative_item(const Json& j, const JsonLine& at, std::string& format) {
  GenerativeItem item;
  item.line = at.line;
  if (j.find("prompt")) {
    format = "prompt";
    item.prompt = text_field(field(j, "prompt", "a generative", at), "prompt", at);
  } else {
    format = "gsm8k";
    item.prompt = "Question: " + text_field(field(j, "question", "a GSM8K", at), "question", at) + "\nAnswer:";
  }
  const Json& answer = field(j, "answer", format == "gsm8k" ? "a GSM8K" : "a generative", at);
  if (answer.is_int()) item.answer = std::to_string(answer.as_int());
  else item.answer = text_field(answer, "answer", at);
  if (item.prompt.empty()) at.fail("the prompt is empty");
  if (item.answer.find_first_not_of(" \t\n\r") == std::string::npos) at.fail("the answer is empty");
  return item;
}

}  // namespace

ChoiceItem parse_choice_item(std::string_view text, const std::string& path, int64_t line, std::string& format) {
  const JsonLine at{path, line};
  return choice_item(parse_object_line(text, at, "an item"), at, format);
}

namespace {

ChoiceItem choice_item(const Json& j, const JsonLine& at, std::string& format) {
  ChoiceItem item;
  if (j.find("ctx") || j.find("endings")) {
    format = "hellaswag", item = three_fields(j, "a HellaSwag", "ctx", "endings", "label", at);
  } else if (j.find("question") || j.find("answerKey")) {
    format = "arc", item = arc(j, at);
  } else if (j.find("context") || j.find("choices") || j.find("answer")) {
    format = "plain", item = three_fields(j, "a plain", "context", "choices", "answer", at);
  } else {
    std::string keys;
    for (const auto& [k, v] : j.as_object()) keys += cat(keys.empty() ? "" : ", ", json_quote(k));
    at.fail("not a task item: expected ", kLayouts, ", got the fields ", keys.empty() ? "(none)" : keys);
  }
  item.line = at.line;
  if (item.context.empty()) at.fail("the context is empty");
  if (item.choices.size() < 2) at.fail(item.choices.size(), " choice", item.choices.size() == 1 ? "" : "s", ", needs at least 2");
  for (size_t i = 0; i < item.choices.size(); ++i)
    if (item.choices[i].empty()) at.fail("choice ", i, " is empty");
  if (item.answer < 0 || item.answer >= int64_t(item.choices.size()))
    at.fail("the answer ", item.answer, " is out of range: ", item.choices.size(), " choices, indices 0 to ",
            item.choices.size() - 1);
  return item;
}

}  // namespace

TaskFile read_task_file(const std::string& path, int64_t limit) {
  TaskFile task;
  task.path = path;
  for_each_line(path, [&](std::string_view one, const JsonLine& where) {
    const Json j = parse_object_line(one, where, "an item");
    std::string format;
    const bool generative = is_generative(j);
    if (task.size() && generative != task.is_generative())
      where.fail(generative ? "a generative item (prompt, answer)" : "a multiple-choice item", " in a ",
                 task.is_generative() ? "generative" : "multiple-choice", " file (its first item is ", task.format,
                 "'s): a file holds one kind");
    if (generative) task.generative.push_back(generative_item(j, where, format));
    else task.items.push_back(choice_item(j, where, format));
    if (task.format.empty()) task.format = format;
    return limit <= 0 || task.size() < limit;
  });
  if (task.size() == 0) throw Error(cat(path, ": no items (one JSON object a line: ", kLayouts, ")"));
  return task;
}

}  // namespace folio
