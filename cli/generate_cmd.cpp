// folio generate: write text from a checkpoint, streaming it as it is sampled.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "autograd/parallel.h"
#include "cli/common.h"
#include "data/dataset.h"
#include "io/checkpoint.h"
#include "infer/generator.h"

namespace folio::cli {
namespace {

void declare(po::options_description& opts) {
  const SampleOptions d;
  add_checkpoint(opts);
  opts.add_options()("prompt", with_default<std::string>("\n"), cat("text to continue; ", kEscapesHelp, ", as the default shows (not given, a model "
                         "trained on a token directory starts a new document instead)").c_str())
      ("prompt-file", po::value<std::string>(), "read the prompt from this file instead")
      ("max-new-tokens", with_default<int64_t>(d.max_new_tokens), "tokens to generate per sample")
      ("num-samples", with_default<int64_t>(1), "independent samples")
      ("temperature", with_default<float>(0.8f), "softmax temperature (>= 0; 0: the most likely token every time, as --greedy)")
      ("top-k", with_default<int64_t>(d.top_k), "sample from the k most likely tokens (0: all)")
      ("top-p", with_default<float>(d.top_p), "nucleus sampling mass in (0, 1]")
      ("seed", with_default<std::string>("1337"), "sampling seed")
      ("greedy", po::bool_switch(), "always the most likely token (no sampling; --temperature, --top-k, --top-p unused)")
      ("context-shift", with_default<int64_t>(0),
       "once the context holds block_size tokens, drop this many of the oldest at once and recompute the "
       "rest (0: block_size/2; 1: slide by one, the model always sees block_size tokens but recomputes them "
       "for every new one). Models trained with --pos rope roll the cache by one instead and never recompute")
      ("no-kv-cache", po::bool_switch(),
       "recompute the whole context for every token (slower; the same text, except with --pos rope models, "
       "whose rolling cache remembers more than a recompute sees)");
  add_dtype(opts);
  add_weights(opts);
  add_threads(opts);
  opts.add_options()("decode-threads", with_default<int64_t>(1),
                     cat("threads a decode step's large products split their rows across, at most ", kMaxThreads,
                         " (the prompt's use --threads; 1: one thread, which on a busy machine does not wait for a "
                         "descheduled other)").c_str())
      ("timings", po::bool_switch(),
       "after each sample, print to standard error the prompt's tokens/s (its prefill and the first token) and "
       "the generated tokens' (each later token's decode step and sampling)");
}

// What --timings prints: the prompt's evaluation (the first next(), a prefill of the
// window and one sample) and the decode steps after it, counted as llama.cpp counts them.
std::string timings_line(int64_t prompt_tokens, double prompt_s, int64_t decoded, double decode_s) {
  auto rate = [](int64_t n, double s) { return s > 0 ? cat(n / s) : std::string("inf"); };
  std::string line = cat("timings: prompt ", prompt_tokens, " tokens in ", prompt_s * 1e3, " ms (",
                         rate(prompt_tokens, prompt_s), " tokens/s)");
  if (decoded > 0)
    line += cat("; generated ", decoded, " more tokens in ", decode_s * 1e3, " ms (", rate(decoded, decode_s),
                " tokens/s)");
  return line + "\n";
}

}  // namespace

SampleOptions sampling_flags(const po::variables_map& vm, int64_t fewest_new_tokens) {
  SampleOptions so;
  so.max_new_tokens = vm["max-new-tokens"].as<int64_t>();
  so.temperature = vm["temperature"].as<float>();
  so.top_k = vm["top-k"].as<int64_t>();
  so.top_p = vm["top-p"].as<float>();
  so.greedy = vm["greedy"].as<bool>();
  if (so.max_new_tokens < fewest_new_tokens)
    throw UsageError(cat("--max-new-tokens must be >= ", fewest_new_tokens, ", got ", so.max_new_tokens));
  if (!(so.temperature >= 0.0f && std::isfinite(so.temperature)))
    throw UsageError(cat("--temperature must be >= 0 (0: the most likely token every time), got ", so.temperature));
  // Temperature 0 is the limit of sampling as it cools: always the most likely token,
  // as OpenAI's API and folio serve read it.
  if (so.temperature == 0.0f) so.greedy = true, so.temperature = 1.0f;
  if (so.top_k < 0) throw UsageError(cat("--top-k must be >= 0 (0: off), got ", so.top_k));
  if (!(so.top_p > 0.0f && so.top_p <= 1.0f)) throw UsageError(cat("--top-p must be in (0, 1], got ", so.top_p));
  return so;
}

namespace {

// The sampling options, each checked under the flag's name (SampleOptions::validate
// checks them again for the library's callers).
SampleOptions sample_options(const po::variables_map& vm) {
  SampleOptions so = sampling_flags(vm, 0);
  so.kv_cache = !vm["no-kv-cache"].as<bool>();
  so.context_shift = vm["context-shift"].as<int64_t>();
  if (so.context_shift < 0)
    throw UsageError(cat("--context-shift must be >= 0 (0: block_size / 2), got ", so.context_shift));
  so.validate();
  return so;
}

std::function<int()> prepare(const po::variables_map& vm) {
  apply_threads(vm);
  const SampleOptions so = sample_options(vm);
  const Precision dtype = dtype_option(vm);
  const nn::Weights weights = weights_option(vm, dtype);
  if (weights != nn::Weights::f32 && !so.kv_cache)
    throw UsageError(cat("--weights ", to_string(weights), " is read by the KV-cached decoder: drop --no-kv-cache, "
                         "or use --weights f32"));
  const int64_t samples = positive<int64_t>(vm, "num-samples");
  // At most --threads' own bound (autograd/parallel.h), far more than any CPU's hardware
  // threads: the decoder keeps a row of block_size floats per thread for attention, and a
  // large product starts an OpenMP thread per share of its rows. 1e9 was taken, and the
  // first step asked for 128 GB (a context of 32) and died of std::bad_alloc (exit 1).
  const int64_t decode_threads = positive<int64_t>(vm, "decode-threads", kMaxThreads);
  warn_beyond_cores("--decode-threads", decode_threads);
  if (decode_threads > 1 && !so.kv_cache)
    throw UsageError(cat("--decode-threads ", decode_threads, " splits the KV-cached decoder's steps: drop "
                         "--no-kv-cache, or use --decode-threads 1"));
  const uint64_t seed = u64_option(vm["seed"].as<std::string>(), "seed");
  if (vm.count("prompt-file") && !vm["prompt"].defaulted())
    throw UsageError("--prompt and --prompt-file both give the prompt: use one of them");
  std::string text = vm.count("prompt-file") ? read_file(vm["prompt-file"].as<std::string>())
                                                   : unescaped(vm["prompt"].as<std::string>());
  if (text.empty()) throw UsageError("the prompt is empty");
  auto ck = std::make_shared<ModelCheckpoint>(load_model(checkpoint_option(vm)));
  ck->model->eval();
  ck->model->set_precision(dtype);
  // A model trained on documents (a token directory) starts one after its end-of-text
  // token when no prompt is given, as a document begins.
  const std::optional<int32_t> eot = ck->tokenizer->end_of_text();
  const bool from_document_start = eot && vm["prompt"].defaulted() && !vm.count("prompt-file");
  std::vector<int32_t> prompt;
  try {
    prompt = from_document_start ? std::vector<int32_t>{*eot} : ck->tokenizer->encode(text);
    // A model imported from a llama-family GGUF expects its BOS first (Tokenizer::prompt_start).
    if (const std::optional<int32_t> bos = ck->tokenizer->prompt_start()) {
      if (from_document_start) prompt.clear();  // BOS alone begins a document for such a model
      prompt.insert(prompt.begin(), *bos);
    }
  } catch (const Error& e) {  // named as the user gave it: a file's text is not on the command line
    const std::string source =
        vm.count("prompt-file") ? "--prompt-file " + vm["prompt-file"].as<std::string>() : "the prompt";
    throw UsageError(cat(source, ": ", e.what()));
  }
  if (from_document_start) text.clear();
  const bool timings = vm["timings"].as<bool>();
  // The tokens the first step evaluates: the window's, at most block_size.
  const int64_t prompt_tokens = std::min<int64_t>(int64_t(prompt.size()), ck->model->config().block_size);
  return [=] {
    using Clock = std::chrono::steady_clock;
    auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    Rng rng(seed);
    infer::Generator generator(*ck->model, 1, so.kv_cache, weights);
    generator.set_decode_threads(int(decode_threads));
    for (int64_t s = 0; s < samples; ++s) {
      if (s) std::fputs("\n---------------\n", stdout);
      // The prompt as given, then its continuation, printed a whole character at a time:
      // a token may carry part of one (a byte-fallback piece).
      std::fwrite(text.data(), 1, text.size(), stdout);
      generator.start(0, prompt, so, rng, ck->tokenizer.get());
      double prompt_s = 0.0;
      Clock::time_point decode_start{};
      for (int64_t n = 0; n < so.max_new_tokens; ++n) {
        const auto t = Clock::now();
        const std::string piece = generator.next().text;
        if (n == 0) prompt_s = seconds_since(t), decode_start = Clock::now();
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      }
      if (timings && so.max_new_tokens > 0)
        std::fputs(timings_line(prompt_tokens, prompt_s, so.max_new_tokens - 1, seconds_since(decode_start)).c_str(),
                   stderr);
      const std::string rest = generator.finish().text;
      std::fwrite(rest.data(), 1, rest.size(), stdout);
    }
    std::fputc('\n', stdout);
    return 0;
  };
}

}  // namespace

const Command kGenerate = {"generate", "write text from a checkpoint",
                           "Samples text from a checkpoint after a prompt, and writes it to standard output\n"
                           "as it is produced. --checkpoint RUN uses the run's latest weights\n"
                           "(RUN/model.safetensors); --checkpoint RUN/best.safetensors, those with the lowest\n"
                           "validation loss.",
                           declare, prepare};

}  // namespace folio::cli
