// Task files scored on a model (cli/task_runs.h).
#include "cli/task_runs.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "autograd/tensor.h"
#include "base/error.h"
#include "io/json.h"

namespace folio::cli {

TaskRun prepare_task(const std::string& path, const nn::GPT& model, const Tokenizer& tokenizer,
                     const TaskOptions& opt) {
  TaskRun run;
  run.task = read_task_file(path, opt.limit);
  run.name = std::filesystem::path(path).stem().string();
  const int64_t T = model.config().block_size;
  for (const GenerativeItem& item : run.task.generative) {
    // An answer normalised to nothing ("#### " alone) would match an empty reply.
    if (normalised_answer(item.answer).empty())
      throw Error(cat(path, ":", item.line, ": the answer ", json_quote(item.answer),
                      " is empty once normalised (what follows its last \"####\", without commas, dollar signs or "
                      "a final period): an empty reply would match it"));
    try {
      run.prompts.push_back(prompt_tokens(tokenizer, item.prompt));
    } catch (const Error& e) {
      throw Error(cat(path, ":", item.line, ": ", e.what()));
    }
  }
  for (const ChoiceItem& item : run.task.items) {
    TokenizedItem t{&item, {}, false};
    for (const std::string& choice : item.choices) {
      try {
        t.choices.push_back(choice_tokens(tokenizer, item.context, choice, T));
      } catch (const Error& e) {
        const std::string what = e.what();
        throw Error(cat(path, ":", item.line, ": ",
                        what.starts_with("the context") ? "" : cat("choice ", t.choices.size(), ": "), what));
      }
      t.cut = t.cut || t.choices.back().cut;
    }
    run.cut += t.cut;
    run.items.push_back(std::move(t));
  }
  return run;
}

namespace {

// Multiple choice: the choices of whole items, as many as fit in opt.batch rows (one
// item at least), through one forward pass.
void score_choices(const TaskRun& run, const nn::GPT& model, const TaskOptions& opt, TaskResult& r) {
  std::vector<int> correct, correct_norm;  // (items) 0/1 each
  for (size_t first = 0; first < run.items.size();) {
    std::vector<ChoiceTokens> rows;
    size_t end = first;
    while (end < run.items.size() &&
           (end == first || int64_t(rows.size() + run.items[end].choices.size()) <= opt.batch)) {
      rows.insert(rows.end(), run.items[end].choices.begin(), run.items[end].choices.end());
      ++end;
    }
    const std::vector<double> sums = continuation_logprobs(model, rows);  // (rows)
    size_t at = 0;
    for (size_t i = first; i < end; ++i) {
      const ChoiceItem& item = *run.items[i].item;
      const std::span<const double> logprobs(sums.data() + at, item.choices.size());
      at += item.choices.size();
      const ChoicePick pick = pick_choice(logprobs, item.choices);
      correct.push_back(pick.pred == item.answer);
      correct_norm.push_back(pick.pred_norm == item.answer);
      if (!opt.log_samples) continue;
      Json::Array lps;
      for (double lp : logprobs) lps.emplace_back(lp);
      r.samples += Json(Json::Object{{"task", run.name}, {"line", item.line}, {"logprobs", std::move(lps)},
                                     {"pred", pick.pred}, {"pred_norm", pick.pred_norm}, {"label", item.answer},
                                     {"cut", run.items[i].cut}})
                       .dump() +
                   "\n";
    }
    first = end;
  }
  r.acc = mean_with_stderr(correct), r.acc_norm = mean_with_stderr(correct_norm);
  r.n = int64_t(correct.size()), r.cut = run.cut;
}

// Generative: greedy text after each prompt, matched to the answer.
void score_generated(const TaskRun& run, const nn::GPT& model, const Tokenizer& tokenizer, const TaskOptions& opt,
                     TaskResult& r) {
  const GreedyOptions greedy{opt.max_new_tokens, opt.stops, opt.batch};
  const std::vector<Greedy> outputs = generate_greedy(model, tokenizer, run.prompts, greedy);
  std::vector<int> correct;  // (items) 0/1 each
  for (size_t i = 0; i < outputs.size(); ++i) {
    const GenerativeItem& item = run.task.generative[i];
    const std::string pred = normalised_answer(outputs[i].text), label = normalised_answer(item.answer);
    correct.push_back(pred == label);
    r.cut += outputs[i].cut;
    if (!opt.log_samples) continue;
    r.samples += Json(Json::Object{{"task", run.name}, {"line", item.line}, {"output", outputs[i].text},
                                   {"pred", pred}, {"label", label}, {"exact_match", correct.back()},
                                   {"tokens", outputs[i].tokens}, {"cut", outputs[i].cut}})
                     .dump() +
                 "\n";
  }
  r.exact_match = mean_with_stderr(correct);
  r.n = int64_t(correct.size());
}

}  // namespace

TaskResult run_task(const TaskRun& run, nn::GPT& model, const Tokenizer& tokenizer, const TaskOptions& opt) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const bool was_training = model.training();
  NoGradGuard no_grad;
  model.eval();
  TaskResult r;
  r.name = run.name, r.path = run.task.path, r.format = run.task.format, r.generative = run.task.is_generative();
  if (r.generative) score_generated(run, model, tokenizer, opt, r);
  else score_choices(run, model, opt, r);
  model.train(was_training);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.items_per_s = double(r.n) / std::max(seconds, 1e-9);
  return r;
}

}  // namespace folio::cli
