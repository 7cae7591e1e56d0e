// folio eval --task FILE... (cli/task_eval_cmd.h): reads and tokenizes every item of
// every file before the run, so a bad line is exit 2 with nothing written; then scores
// each file (cli/task_runs.h) and reports it.
#include "cli/task_eval_cmd.h"

#include <cstdio>
#include <memory>

#include "base/atomic_file.h"
#include "cli/task_runs.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "train/chat_data.h"  // same_data_path

namespace folio::cli {
namespace {

struct TaskEval {
  ModelCheckpoint ck;
  TaskOptions opt;
  std::vector<TaskRun> runs;  // one per --task, in order
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

Json json_of(const TaskResult& r, const ModelCheckpoint& ck) {
  Json::Object out{{"task", r.name}, {"path", r.path}, {"format", r.format}, {"n", r.n}};
  if (r.generative) {
    out.emplace_back("exact_match", r.exact_match.mean);
    out.emplace_back("exact_match_stderr", optional_number(r.exact_match.standard_error));
  } else {
    out.emplace_back("acc", r.acc.mean);
    out.emplace_back("acc_stderr", optional_number(r.acc.standard_error));
    out.emplace_back("acc_norm", r.acc_norm.mean);
    out.emplace_back("acc_norm_stderr", optional_number(r.acc_norm.standard_error));
  }
  for (auto kv : Json::Object{{"items_per_s", r.items_per_s}, {"cut", r.cut}, {"checkpoint", ck.path}, {"step", ck.step}})
    out.push_back(std::move(kv));
  return Json(std::move(out));
}

void print(const TaskResult& r, const ModelCheckpoint& ck, const TaskOptions& opt) {
  const int64_t T = ck.model->config().block_size;
  std::printf("%s (step %lld) on %s (%s format): %s\n", ck.path.c_str(), (long long)ck.step, r.path.c_str(),
              r.format.c_str(), plural(r.n, "item").c_str());
  if (r.cut && r.generative)
    std::printf("%s cut: the prompt and the text written exceeded the window of %lld, whose first tokens the model "
                "lost\n", plural(r.cut, "item").c_str(), (long long)T);
  else if (r.cut)
    std::printf("%s cut: the context lost its first tokens so that each choice fits the window of %lld\n",
                plural(r.cut, "item").c_str(), (long long)T);
  if (r.generative) {
    std::printf("exact_match  %.4f %s  (n %lld, %.1f items/s; greedy, at most %lld tokens)\n", r.exact_match.mean,
                shown_stderr(r.exact_match.standard_error).c_str(), (long long)r.n, r.items_per_s,
                (long long)opt.max_new_tokens);
    return;
  }
  std::printf("acc       %.4f %s  (n %lld, %.1f items/s)\n", r.acc.mean, shown_stderr(r.acc.standard_error).c_str(),
              (long long)r.n, r.items_per_s);
  std::printf("acc_norm  %.4f %s  (n %lld, %.1f items/s; the sum over the choice's characters)\n", r.acc_norm.mean,
              shown_stderr(r.acc_norm.standard_error).c_str(), (long long)r.n, r.items_per_s);
}

}  // namespace

void declare_task_options(po::options_description& opts) {
  opts.add_options()("task", po::value<std::vector<std::string>>()->composing(),
                     "score a task file instead of a loss (repeatable: each is reported). JSONL: multiple choice "
                     "(HellaSwag's ctx/endings/label, context/choices/answer, ARC's question/answerKey) or generative "
                     "(prompt/answer, GSM8K's question/answer); see docs/evals.md")
      ("limit", with_default<int64_t>(0), "with --task: score the first N items of each file (0: all)")
      ("max-new-tokens", with_default<int64_t>(256), "with a generative --task: tokens written at most per item")
      ("stop", po::value<std::vector<std::string>>()->composing(),
       "with a generative --task: the text ends before this string (repeatable; default: a blank line "
       "and \"Question:\")")
      ("log-samples", po::value<std::string>(),
       "with --task: write one JSON line per item here (multiple choice: logprobs, pred, pred_norm, label; "
       "generative: output, pred, label, exact_match)");
  add_overwrite(opts);
}

std::function<int()> prepare_task_eval(const po::variables_map& vm) {
  apply_threads(vm);
  refuse_loss_options(vm);
  auto run = std::make_shared<TaskEval>();
  TaskOptions& opt = run->opt;
  opt.batch = positive<int64_t>(vm, "batch-size");
  opt.limit = non_negative<int64_t>(vm, "limit");
  opt.max_new_tokens = positive<int64_t>(vm, "max-new-tokens");
  if (vm.count("stop")) opt.stops = vm["stop"].as<std::vector<std::string>>();
  for (const std::string& s : opt.stops)
    if (s.empty()) throw UsageError("--stop must not be empty");
  const bool json = vm["json"].as<bool>();
  const Precision dtype = dtype_option(vm);
  if (weights_option(vm, dtype) != nn::Weights::f32)
    throw UsageError("--task scores with the model's f32 weights; --weights applies to the loss evaluation only");
  const std::string samples = vm.count("log-samples") ? vm["log-samples"].as<std::string>() : "";
  if (!samples.empty()) check_output(vm, "--log-samples " + samples, samples);
  opt.log_samples = !samples.empty();

  run->ck = load_model(checkpoint_option(vm));
  run->ck.model->set_precision(dtype);
  const std::vector<std::string> tasks = vm["task"].as<std::vector<std::string>>();
  // --overwrite replaces an earlier log, never a file this command reads.
  for (const std::string& input : tasks)
    if (!samples.empty() && same_data_path(samples, input))
      throw UsageError(cat("--log-samples ", samples, " is the --task file ", input,
                           ", which the samples would replace: give another path"));
  if (!samples.empty() && same_data_path(samples, run->ck.path))
    throw UsageError(cat("--log-samples ", samples, " is the checkpoint ", run->ck.path,
                         ", which the samples would replace: give another path"));
  for (const std::string& path : tasks) {
    try {
      run->runs.push_back(prepare_task(path, *run->ck.model, *run->ck.tokenizer, opt));
    } catch (const Error& e) {
      throw UsageError(cat("--task ", e.what()));
    }
  }

  return [=] {
    std::string log;  // --log-samples' lines, every task's
    std::vector<TaskResult> results;
    for (const TaskRun& task : run->runs) {
      results.push_back(run_task(task, *run->ck.model, *run->ck.tokenizer, run->opt));
      log += results.back().samples;
    }
    if (!samples.empty()) write_file_atomic(samples, log);
    int64_t lines = 0;
    for (const TaskResult& r : results) {
      lines += r.n;
      if (json) std::printf("%s\n", json_of(r, run->ck).dump().c_str());  // one object per task, a line each
      else print(r, run->ck, run->opt);
    }
    if (!samples.empty() && !json) std::printf("wrote %s (%s)\n", samples.c_str(), plural(lines, "sample").c_str());
    return 0;
  };
}

}  // namespace folio::cli
