// folio eval --task FILE (cli/task_eval_cmd.h): reads and tokenizes every item before
// the run, so a bad line is exit 2 with nothing written; then scores the choices a
// batch of rows at a time and reports acc and acc_norm.
#include "cli/task_eval_cmd.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "base/atomic_file.h"
#include "infer/task_eval.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/task_file.h"

namespace folio::cli {
namespace {

// An item with its choices' tokens, checked against the model's window.
struct TokenizedItem {
  const ChoiceItem* item;
  std::vector<ChoiceTokens> choices;  // one per choice
  bool cut = false;                    // some choice's context was cut to fit
};

struct TaskRun {
  ModelCheckpoint ck;
  ChoiceTask task;
  std::vector<TokenizedItem> items;
  int64_t cut = 0;  // items cut to fit the window
};

// The loss evaluation's options, which mean nothing to a task.
void refuse_loss_options(const po::variables_map& vm) {
  for (const char* name : {"data", "split", "max-windows", "val-fraction"})
    if (vm.count(name) && !vm[name].defaulted())
      throw UsageError(cat("--", name, " belongs to the loss evaluation; --task scores a task file instead"));
}

Json optional_number(const std::optional<double>& v) { return v ? Json(*v) : Json(); }
std::string shown_stderr(const std::optional<double>& v) {
  if (!v) return "(one item: no stderr)";
  char buf[32];
  std::snprintf(buf, sizeof buf, "± %.4f", *v);
  return buf;
}

}  // namespace

void declare_task_options(po::options_description& opts) {
  opts.add_options()("task", po::value<std::string>(),
                     "score a multiple-choice task file instead of a loss (JSONL: HellaSwag's ctx/endings/label, "
                     "context/choices/answer, or ARC's question/answerKey; see docs/evals.md)")
      ("limit", with_default<int64_t>(0), "with --task: score the first N items (0: all)")
      ("log-samples", po::value<std::string>(),
       "with --task: write each item's choice log-probabilities, pred, pred_norm and label here (JSONL)");
  add_overwrite(opts);
}

std::function<int()> prepare_task_eval(const po::variables_map& vm) {
  apply_threads(vm);
  refuse_loss_options(vm);
  const int64_t batch = positive<int64_t>(vm, "batch-size");
  const int64_t limit = non_negative<int64_t>(vm, "limit");
  const bool json = vm["json"].as<bool>();
  const Precision dtype = dtype_option(vm);
  if (weights_option(vm, dtype) != nn::Weights::f32)
    throw UsageError("--task scores with the model's f32 weights; --weights applies to the loss evaluation only");
  const std::string samples = vm.count("log-samples") ? vm["log-samples"].as<std::string>() : "";
  if (!samples.empty()) check_output(vm, "--log-samples " + samples, samples);

  auto run = std::make_shared<TaskRun>();
  run->ck = load_model(checkpoint_option(vm));
  run->ck.model->set_precision(dtype);
  try {
    run->task = read_choice_task(vm["task"].as<std::string>(), limit);
  } catch (const Error& e) {
    throw UsageError(cat("--task ", e.what()));
  }
  const int64_t T = run->ck.model->config().block_size;
  for (const ChoiceItem& item : run->task.items) {
    TokenizedItem t{&item, {}, false};
    for (const std::string& choice : item.choices) {
      try {
        t.choices.push_back(choice_tokens(*run->ck.tokenizer, item.context, choice, T));
      } catch (const Error& e) {
        const std::string what = e.what();
        throw UsageError(cat("--task ", run->task.path, ":", item.line, ": ",
                             what.starts_with("the context") ? "" : cat("choice ", t.choices.size(), ": "), what));
      }
      t.cut = t.cut || t.choices.back().cut;
    }
    run->cut += t.cut;
    run->items.push_back(std::move(t));
  }

  return [=] {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    NoGradGuard no_grad;
    run->ck.model->eval();
    std::vector<int> correct, correct_norm;  // (items) 0/1 each
    std::string log;                         // --log-samples' lines
    // A forward pass takes whole items, as many as fit in --batch-size rows (one at least).
    for (size_t first = 0; first < run->items.size();) {
      std::vector<ChoiceTokens> rows;
      size_t end = first;
      while (end < run->items.size() &&
             (end == first || int64_t(rows.size() + run->items[end].choices.size()) <= batch)) {
        rows.insert(rows.end(), run->items[end].choices.begin(), run->items[end].choices.end());
        ++end;
      }
      const std::vector<double> sums = continuation_logprobs(*run->ck.model, rows);  // (rows)
      size_t at = 0;
      for (size_t i = first; i < end; ++i) {
        const ChoiceItem& item = *run->items[i].item;
        const std::span<const double> logprobs(sums.data() + at, item.choices.size());
        at += item.choices.size();
        const ChoicePick pick = pick_choice(logprobs, item.choices);
        correct.push_back(pick.pred == item.answer);
        correct_norm.push_back(pick.pred_norm == item.answer);
        if (samples.empty()) continue;
        Json::Array lps;
        for (double lp : logprobs) lps.emplace_back(lp);
        log += Json(Json::Object{{"line", item.line}, {"logprobs", std::move(lps)}, {"pred", pick.pred},
                                 {"pred_norm", pick.pred_norm}, {"label", item.answer}, {"cut", run->items[i].cut}})
                   .dump() +
               "\n";
      }
      first = end;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const double items_per_s = double(correct.size()) / std::max(seconds, 1e-9);
    const Metric acc = mean_with_stderr(correct), acc_norm = mean_with_stderr(correct_norm);
    const int64_t n = int64_t(correct.size());
    if (!samples.empty()) write_file_atomic(samples, log);
    const std::string name = std::filesystem::path(run->task.path).stem().string();
    if (json) {
      const Json out = Json::Object{{"task", name},
                                    {"n", n},
                                    {"acc", acc.mean},
                                    {"acc_stderr", optional_number(acc.standard_error)},
                                    {"acc_norm", acc_norm.mean},
                                    {"acc_norm_stderr", optional_number(acc_norm.standard_error)},
                                    {"items_per_s", items_per_s},
                                    {"cut", run->cut},
                                    {"format", run->task.format},
                                    {"checkpoint", run->ck.path},
                                    {"step", run->ck.step}};
      std::printf("%s\n", out.dump().c_str());
      return 0;
    }
    std::printf("%s (step %lld) on %s (%s format): %s\n", run->ck.path.c_str(), (long long)run->ck.step,
                run->task.path.c_str(), run->task.format.c_str(), plural(n, "item").c_str());
    if (run->cut)
      std::printf("%s cut: the context lost its first tokens so that each choice fits the window of %lld\n",
                  plural(run->cut, "item").c_str(), (long long)run->ck.model->config().block_size);
    std::printf("acc       %.4f %s  (n %lld, %.1f items/s)\n", acc.mean, shown_stderr(acc.standard_error).c_str(),
                (long long)n, items_per_s);
    std::printf("acc_norm  %.4f %s  (n %lld, %.1f items/s; the sum over the choice's characters)\n", acc_norm.mean,
                shown_stderr(acc_norm.standard_error).c_str(), (long long)n, items_per_s);
    if (!samples.empty()) std::printf("wrote %s (%s)\n", samples.c_str(), plural(n, "sample").c_str());
    return 0;
  };
}

}  // namespace folio::cli
