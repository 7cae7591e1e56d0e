// folio train: learn a character-level GPT from a text file or a token directory. Its
// options are the rows of one table (cli/train_options.h); this file reads them: into
// --help, into TrainOptions, against a resumed run's, and into the library's messages.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/common.h"
#include "cli/train_options.h"
#include "cli/train_task_evals.h"
#include "autograd/parallel.h"
#include "train/size_warmups.h"
#include "train/distributed.h"
#include "train/optimizer.h"
#include "train/chat_data.h"  // same_data_path, data_path_kind
#include "train/trainer.h"
#include "train/run_state.h"

namespace folio::cli {
namespace {

namespace fs = std::filesystem;

using enum OnResume;

void declare(po::options_description& desc) {
  TrainOptions d = train_defaults();
  for (const TrainOption& o : train_options()) o.declare(desc, d);
  declare_eval_task_options(desc);
  add_threads(desc);
}

// A message of the library's checks in the words of the command line: the fields it
// names become the flags ("[config] n_embd 64 is not divisible by n_head 3" reads
// "--n-embd 64 is not divisible by --n-head 3"), and the first one says where its
// value came from when the person did not type it there.
std::string in_flags(std::string msg, const po::variables_map& vm, const TrainOptions& o) {
  if (msg.starts_with("[config] ")) msg.erase(0, 9);
  auto word = [&](size_t i) {
    return i < msg.size() && (std::isalnum((unsigned char)msg[i]) || msg[i] == '_' || msg[i] == '-');
  };
  size_t first_at = std::string::npos;
  std::string first;
  for (const TrainOption& opt : train_options()) {
    if (opt.on_resume == always || std::string(opt.flag) == "data" || std::string(opt.flag) == "config") continue;
    std::string field = opt.flag;
    std::replace(field.begin(), field.end(), '-', '_');
    for (size_t at = msg.find(field); at != std::string::npos; at = msg.find(field, at + 1))
      if ((at == 0 || !word(at - 1)) && !word(at + field.size())) {
        msg.replace(at, field.size(), cat("--", opt.flag));
        if (at < first_at) first_at = at, first = opt.flag;
      }
  }
  if (first.empty()) return msg;
  const bool given = vm.count(first) && !vm[first].defaulted();
  if (o.resume && !given) return cat(msg, " (--", first, ": the value saved with the run in ", o.out_dir, ")");
  if (config_file_options().count(first)) return cat(msg, " (--", first, " from --config ", o.train.recipe, ")");
  if (!given) return cat(msg, " (--", first, ": the default)");
  return msg;
}

std::string three_digits(float v) {  // a learning rate in a message
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", double(v));
  return buf;
}

// --resume: the options given that differ from the run's, checked against what was
// saved. A fixed option (the model, the optimizer, the seed) may be repeated, not
// changed. A longer run keeps its cosine: the horizon was --max-iters, and is pinned
// to it unless --lr-decay-iters is given. Any other change of the learning rate at the
// step the run resumes from is said in one line.
// Returns a line to print about the schedule ("" for none).
// Its warnings go to `warnings`, said once the run is sure to start.
std::string merge_resumed(const po::variables_map& vm, TrainOptions& o, const TrainState& saved_state,
                          std::vector<std::string>& warnings) {
  auto given = [&](const char* flag) { return vm.count(flag) && !vm[flag].defaulted(); };
  TrainOptions saved = o;
  saved.train = saved_state.config;
  bool header_read = false;
  std::shared_ptr<const Tokenizer> tokenizer;  // the run's
  auto load = [&] {
    if (header_read) return;
    const CheckpointHeader ck = load_checkpoint_header(RunDir(o.out_dir).model_file());
    saved.model = ck.config, tokenizer = ck.tokenizer, header_read = true;
  };
  // --tokenizer and --vocab-size together: flags that describe the run's tokenizer may
  // be repeated, also where the run saved others (one on a token directory, or started
  // --init-from, was given none and saved the defaults).
  if (given("tokenizer") || given("vocab-size")) {
    load();
    const TokenizerSpec was{saved.train.tokenizer, saved.train.vocab_size};
    const TokenizerSpec asked{given("tokenizer") ? vm["tokenizer"].as<std::string>() : was.name,
                              given("vocab-size") ? vm["vocab-size"].as<int64_t>() : was.vocab_size};
    if ((asked.name != was.name || asked.vocab_size != was.vocab_size) && !spec_describes(asked, *tokenizer))
      throw UsageError(cat(given("tokenizer") ? cat("--tokenizer ", asked.name) : "",
                           given("tokenizer") && given("vocab-size") ? " " : "",
                           given("vocab-size") ? cat("--vocab-size ", asked.vocab_size) : "",
                           " is not the tokenizer of the run in ", o.out_dir, " (", tokenizer->describe(),
                           "), which cannot change when resuming (folio info --checkpoint ", o.out_dir,
                           " shows the flags that describe it)"));
  }
  for (const TrainOption& opt : train_options()) {
    if (opt.on_resume != fixed || !given(opt.flag)) continue;
    if (opt.flag == std::string_view("tokenizer") || opt.flag == std::string_view("vocab-size")) continue;  // above
    load();
    TrainOptions asked = saved;
    opt.apply(vm[opt.flag], asked);
    if (!opt.same(asked, saved))
      throw UsageError(cat("--", opt.flag, " cannot change when resuming: the model and optimizer of the run in ",
                           o.out_dir, " are fixed, and its value differs (folio info --checkpoint ", o.out_dir,
                           " shows the run's options)"));
  }
  o.train = saved.train;
  for (const TrainOption& opt : train_options())
    if (opt.on_resume == override && given(opt.flag)) opt.apply(vm[opt.flag], o);
  TrainConfig& tc = o.train;
  const TrainConfig& before = saved.train;
  std::string note;
  const bool horizon_was_max_iters = before.lr_decay_iters == 0 && before.max_iters > 0;
  if (tc.max_iters != before.max_iters && horizon_was_max_iters && !given("lr-decay-iters")) {
    tc.lr_decay_iters = before.max_iters;
    if (tc.max_iters > before.max_iters)
      note = cat("the cosine keeps the run's horizon of ", before.max_iters, " steps (the lr stays at --min-lr ",
                 shown(tc.min_lr), " after it); --lr-decay-iters N stretches it to step N instead");
  }
  const int64_t step = saved_state.step;
  const double seconds = saved_state.train_seconds;
  auto same_or_warn = [&](const char* what, float was, float now) {
    if (std::abs(now - was) > 1e-6f * std::max(std::abs(was), 1e-12f))
      warnings.push_back(cat(what, " at step ", step, " changes from ", three_digits(was), " to ", three_digits(now),
               " with these options: the run does not continue its schedule exactly"));
  };
  same_or_warn("the learning rate", schedule_of(before).at(step, seconds), schedule_of(tc).at(step, seconds));
  if (tc.optimizer == OptimizerKind::muon)
    same_or_warn("Muon's momentum", momentum_at(muon_config(before), step), momentum_at(muon_config(tc), step));
  if (tc.seq_warmup != before.seq_warmup) {
    load();
    const int64_t block = saved.model.block_size;
    const int64_t was = window_length(step, block, before.seq_warmup), now = window_length(step, block, tc.seq_warmup);
    if (was != now)
      warnings.push_back(cat("the training window at step ", step, " changes from ", was, " to ", now,
               " tokens with these options: the run does not continue its sequence-length warm-up exactly"));
  }
  // Against the new --batch-size both times: a new batch size alone is what was asked for.
  if (const int64_t was = batch_size_at(step, tc.batch_size, before.batch_warmup),
      now = batch_size_at(step, tc.batch_size, tc.batch_warmup);
      was != now)
    warnings.push_back(cat("the batch at step ", step, " changes from ", was, " to ", now,
             " sequences with these options: the run does not continue its batch-size warm-up exactly"));
  return note;
}

std::function<int()> prepare(const po::variables_map& vm) {
  apply_threads(vm);
  TrainOptions o = train_defaults();
  auto given = [&](const char* flag) { return vm.count(flag) && !vm[flag].defaulted(); };
  o.resume = vm["resume"].as<bool>();
  o.overwrite = vm["overwrite"].as<bool>();
  o.quiet = vm["quiet"].as<bool>();
  o.out_dir = vm["out"].as<std::string>();
  if (o.out_dir.empty()) throw UsageError("--out is empty: give the run's directory (its default is out)");
  const RunDir run(o.out_dir);
  // Resuming: the model and the saved training options come from the run; the
  // options given on the command line override the training ones.
  if (o.resume && given("config"))
    throw UsageError("--config cannot be used with --resume: the run continues with the options it saved");
  if (o.resume && o.overwrite)
    throw UsageError("--resume continues the run in --out, --overwrite replaces it: give one of them");
  // A run that stopped before its first save (killed, or diverged at once) left no
  // state.safetensors: there is nothing to --resume.
  const bool resumable = fs::exists(run.state_file());
  // Weights without a state: a run whose state was deleted (only --resume reads it), not
  // one that never saved. --overwrite would replace them; --init-from trains on from them.
  const std::string weights_only =
      resumable || !fs::exists(run.model_file())
          ? ""
          : cat(" holds a run's weights (", run.model_file(), ") but no state.safetensors, which --resume needs (the "
                "optimizer's moments, the data's position): train on from the weights as a new run with --init-from ",
                o.out_dir, " --out ANOTHER_DIR (a fresh optimizer and schedule), or replace them with --overwrite");
  // A run another trainer is writing, said as such: one in its first evaluation holds no
  // state yet, and the refusals below took it for a run that died before its first save
  // ("start it again with --overwrite"). Rank 0's alone: the others' would see its lock.
  if (dist::is_root()) run.lock();  // fails if another process holds it; else let go at once: the trainer takes it
  if (!o.resume && !o.overwrite && run.holds_run())
    throw UsageError(resumable ? cat("--out ", o.out_dir, " already holds a run: continue it with --resume, replace it "
                                     "with --overwrite, or give another --out")
                     : !weights_only.empty()
                         ? cat("--out ", o.out_dir, weights_only)
                         : cat("--out ", o.out_dir, " already holds the files of a run that saved no checkpoint "
                               "(no state.safetensors), which cannot be resumed: start it again with "
                               "--overwrite, or give another --out"));
  if (o.resume && !resumable)
    throw UsageError(!weights_only.empty()
                         ? cat("--resume: ", o.out_dir, weights_only)
                         : cat("--resume: ", o.out_dir, " holds no checkpoint to continue (no ", run.state_file(), ")",
                               run.holds_run() ? ": its run stopped before its first save; start it again with "
                                                 "--overwrite"
                                               : ": train into it without --resume"));
  TrainState saved_state;
  std::string schedule_note, spike_note;
  std::vector<std::string> warnings;  // said once the run starts, after every check
  if (o.resume) saved_state = saved_run(o.out_dir);
  try {
    if (o.resume) schedule_note = merge_resumed(vm, o, saved_state, warnings);
    for (const TrainOption& opt : train_options())
      if (!o.resume || opt.on_resume == always) opt.apply(vm[opt.flag], o);
    // A time budget without a step count: the budget alone ends the run (and shapes the
    // cosine). A resumed run keeps its saved step limit unless --max-iters is given.
    if (!o.resume && given("max-time") && !given("max-iters") && o.train.max_time > 0) o.train.max_iters = 0;
    if (!o.resume && !given("warmup-iters")) o.train.warmup_iters = TrainConfig::default_warmup(o.train.max_iters);
    // A conversations run's loss is the mean over a batch's answers, a few dozen targets:
    // batches of different tasks differ by more than --spike-threshold's standard
    // deviations without anything diverging, and going back to a checkpoint does not
    // change them. Its loss spike test is off unless asked for; non-finite values and
    // the evaluations still guard it.
    if (!o.resume && !given("spike-threshold") && data_path_kind(o.train.data) == DataPathKind::conversations &&
        o.train.spike_threshold > 0) {
      o.train.spike_threshold = 0;
      spike_note = "conversations: the loss spike test is off (a batch's loss averages a few dozen answer tokens, so "
                   "batches differ by more than a spike's standard deviations without diverging); --spike-threshold "
                   "N turns it on";
    }
    if (o.train.max_iters == 0 && o.train.max_time == 0)
      throw UsageError("--max-iters 0 (no step limit) needs a time budget: --max-time SECONDS");
    if (!o.train.init_from.empty() && !o.resume) {
      for (const TrainOption& opt : train_options())
        if (opt.from_init && given(opt.flag))
          throw UsageError(cat("--", opt.flag, " comes from the --init-from checkpoint ", o.train.init_from,
                               " (of the model's options, only --dropout may change)"));
      o.dropout_given = given("dropout");
    }
    o.model.seed = o.train.seed;
    o.model.validate();
    o.train.validate();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(in_flags(e.what(), vm, o));
  }
  // A resumed run steps on the threads it saved, unless --threads is given: with data
  // parallelism they set the shard count, and so the order of the gradient's sums.
  // Not on another number of ranks, which shares each batch out another way whatever
  // the threads: a rank takes the default then (its share of the machine's cores), not
  // the threads a process had to itself (2 ranks of 2 threads on 2 cores) or a rank's
  // share (1 thread of 2 cores).
  std::string threads_note;
  const bool other_ranks = o.resume && saved_state.ranks > 0 && saved_state.ranks != dist::size();
  if (other_ranks)
    threads_note = cat("the run trained on ", plural(saved_state.ranks, "MPI rank"), " and resumes on ", dist::size(),
                       ": each batch is shared out another way, so its weights will differ by rounding from those of "
                       "a run never stopped; ", dist::size() > 1 ? "each rank runs" : "it runs", " on ",
                       given("threads") ? "the --threads given" : cat(plural(num_threads(), "thread"), " (the default)"));
  else if (o.resume && !given("threads") && o.train.threads > 0 && o.train.threads != num_threads()) {
    set_num_threads(int(o.train.threads));
    if (const int cores = int(std::thread::hardware_concurrency()); cores > 0 && o.train.threads > cores)
      threads_note = cat("the run trained on ", o.train.threads, " threads and resumes on them, so that its weights "
                         "are those of a run never stopped; this machine has ", plural(cores, "core"),
                         ", so its steps are slower (--threads ", cores, " is faster, at the cost of that exactness)");
  }
  check_dtype(o.train.dtype);  // a resumed bf16 run too
  o.task_evals = eval_task_option(vm, o.train.eval_interval);
  // The run keeps its text's absolute path: --resume from another directory finds it.
  if (o.train.data.empty() && given("data"))
    throw UsageError("--data is empty: give a text file, a token directory or conversations (FILE.jsonl)");
  if (o.train.data.empty())
    throw UsageError("no --data given, and this folio has no bundled corpus (share/folio/tinyshakespeare.txt beside "
                     "its bin/ directory): give --data FILE");
  if (!o.resume && config_file_options().count("data") && fs::path(o.train.data).is_relative() &&
      !fs::exists(o.train.data))
    throw UsageError(cat("--data ", o.train.data, " (from --config ", o.train.recipe, ") is not there: a recipe's "
                         "paths are read from the working directory (", fs::current_path().string(), "), not from "
                         "the recipe's folder"));
  if (!o.resume || given("data")) o.train.data = fs::absolute(o.train.data).lexically_normal().string();
  else if (!fs::exists(o.train.data))
    throw UsageError(cat("the run's text ", o.train.data, " (its saved --data) cannot be found from here: give --data "
                         "PATH with --resume"));
  const TrainConfig& tc = o.train;
  const bool schedule_given = !o.resume || given("warmup-iters") || given("max-iters");  // else said before
  if (schedule_given && tc.max_iters > 0 && tc.warmup_iters >= tc.max_iters)
    warnings.push_back(cat("--warmup-iters ", tc.warmup_iters, " is not shorter than the run (--max-iters ",
                           tc.max_iters, "): the learning rate never reaches --lr"));
  if (!o.resume && o.train.init_from.empty()) {  // else the model's sizes come from a checkpoint, later
    if (tc.seq_warmup > 0 && window_length(0, o.model.block_size, tc.seq_warmup) == o.model.block_size)
      warnings.push_back(cat("--seq-warmup ", tc.seq_warmup, " does nothing: the context (--block-size ",
                             o.model.block_size, ") is no longer than its first stage of ",
                             seq_warmup_stage(o.model.block_size), " tokens"));
    if (tc.batch_warmup > 0 && batch_size_at(0, tc.batch_size, tc.batch_warmup) == tc.batch_size)
      warnings.push_back(cat("--batch-warmup ", tc.batch_warmup, " does nothing: --batch-size ", tc.batch_size,
                             " cannot start smaller"));
  }
  // Built first: its checks of the text and the checkpoint come before anything else.
  auto trainer = std::make_shared<Trainer>(o);
  if (o.task_evals.prepare) {  // the task files' items, for this model's tokenizer and window
    try {
      o.task_evals.prepare(trainer->model(), *trainer->data().tokenizer);
    } catch (const Error& e) {
      throw UsageError(cat("--eval-task ", e.what()));
    }
  }
  // A token directory brings its tokenizer, and a --tokenizer given with it must describe
  // it. The library refuses any other name, but reads char as folio train's default,
  // which it cannot tell from one given: --tokenizer char trained on a bpe directory's
  // tokens without a word. (--resume and --init-from check theirs before.)
  if (!o.resume && given("tokenizer") && trainer->data().is_token_dir() &&
      !spec_describes({tc.tokenizer, tc.vocab_size}, *trainer->data().tokenizer))
    throw UsageError(cat("--tokenizer ", tc.tokenizer, " goes with a text file: the token directory ", tc.data,
                         " was tokenized already, with ", trainer->data().tokenizer->describe(),
                         " (leave --tokenizer out", config_file_options().count("tokenizer") ? cat(" of --config ", tc.recipe) : "",
                         ")"));
  if (const int64_t replaced = trainer->data().invalid_utf8_bytes)
    warnings.push_back(invalid_utf8_warning(o.train.data, replaced));
  if (!trainer->data_warning().empty()) warnings.push_back(trainer->data_warning());
  for (const std::string& w : trainer->resume_warnings()) warnings.push_back(w);
  // best.safetensors is the checkpoint of the lowest val loss so far; on other data that
  // minimum compares losses on two val sets.
  if (o.resume && !same_data_path(o.train.data, saved_state.config.data))
    warnings.push_back(cat("--data ", o.train.data, " is not the data the run trained on so far (",
                           saved_state.config.data, "): best.safetensors (val loss ", saved_state.best_val_loss,
                           " on that data's val split) will be compared with val losses on this data's"));
  // So does another --val-fraction, on the same text or conversations: their split moves,
  // and what the model trained on may now be val (a token directory's split is its shards).
  if (o.resume && tc.train_fraction != saved_state.config.train_fraction && !trainer->data().is_token_dir())
    warnings.push_back(cat("--val-fraction ", shown(1 - tc.train_fraction), " is not the run's ",
                           shown(1 - saved_state.config.train_fraction), ": the split of ", o.train.data,
                           " moves, so best.safetensors (val loss ", saved_state.best_val_loss,
                           " on the old val split) will be compared with val losses on the new one, which may hold "
                           "text the model trained on"));
  if (o.resume) {
    const bool steps_done = tc.max_iters > 0 && saved_state.step >= tc.max_iters;
    const bool time_done = tc.max_time > 0 && saved_state.train_seconds >= tc.max_time;
    if (steps_done || time_done)
      return [=] {
        if (!dist::is_root()) return 0;  // the ranks hold the same run: one says so
        std::printf("%s is at step %lld%s: nothing left to do (%s continues it)\n", o.out_dir.c_str(),
                    (long long)saved_state.step,
                    steps_done ? cat(" of --max-iters ", tc.max_iters).c_str()
                               : cat(", past --max-time ", shown(tc.max_time)).c_str(),
                    steps_done ? "a larger --max-iters" : "a larger --max-time");
        return 0;
      };
  }
  const bool dtype_auto = given("dtype") && vm["dtype"].as<std::string>() == "auto";
  return [trainer, o, step = saved_state.step, schedule_note, threads_note, spike_note, dtype_auto, warnings, vm] {
    for (const std::string& w : warnings) warn(w);
    if (dtype_auto && !o.quiet && dist::is_root()) std::printf("%s\n", dtype_auto_line(o.train.dtype).c_str());
    if (!spike_note.empty() && !o.quiet && dist::is_root()) std::printf("%s\n", spike_note.c_str());
    if (o.resume && !o.quiet && dist::is_root()) {
      std::printf("resuming %s from step %lld (of %s) on %s\n", o.out_dir.c_str(), (long long)step,
                  o.train.max_iters ? cat(o.train.max_iters).c_str() : cat(shown(o.train.max_time), " s").c_str(),
                  o.train.data.c_str());
      if (!schedule_note.empty()) std::printf("%s\n", schedule_note.c_str());
      if (!threads_note.empty()) std::printf("%s\n", threads_note.c_str());
      std::fflush(stdout);
    }
    start_run(vm, o.out_dir);
    trainer->run();
    finish_run(vm, o.out_dir);
    if (!trainer->diverged().empty()) return 3;  // the guards stopped it, and said why
    // Stopped by a signal: the checkpoint is saved, and the shell sees 128 + the signal.
    return trainer->stop_signal() ? 128 + trainer->stop_signal() : 0;
  };
}

}  // namespace

const Command kTrain = {
    "train", "train a model on a text file (default: the bundled tiny Shakespeare) or a token directory",
    "Trains a GPT on --data and writes DIR/model.safetensors, DIR/best.safetensors,\n"
    "DIR/state.safetensors and DIR/log.csv into --out DIR; a DIR that holds a run is\n"
    "refused unless --overwrite. --resume continues the run in DIR where it stopped\n"
    "(with its saved options; options given on the command line override the training\n"
    "options, e.g. a larger --max-iters, which keeps the cosine's horizon; a change of\n"
    "the learning rate at that step is a warning); it runs on the run's saved thread\n"
    "count unless --threads is given (or it resumes on another number of MPI ranks).\n"
    "Ctrl-C or SIGTERM saves and exits 130 or 143.\n"
    "--max-time SECONDS stops the run after the step where its training time (the\n"
    "steps, not the evaluations) reaches SECONDS; given without --max-iters, it is\n"
    "the only limit and the cosine decays over it. A step whose loss or gradient norm\n"
    "is not finite or spikes is rolled back (--on-divergence); a run the guards stop\n"
    "exits 3.",
    declare, prepare};

}  // namespace folio::cli
