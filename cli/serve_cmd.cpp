// folio serve: an OpenAI-compatible HTTP server for a checkpoint, with a web page
// to talk to the model and watch its attention (serve/).
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string_view>
#include <thread>

#include "cli/common.h"
#include "data/dataset.h"
#include "io/checkpoint.h"
#include "serve/model_card.h"
#include "serve/server.h"

namespace folio::cli {
namespace {

// The most seconds --timeout and --shutdown-grace take: a week is longer than any request
// or shutdown anyone waits for, and far from where the grace's milliseconds overflow an
// int64 (--shutdown-grace 1e30 became a negative grace: running requests were cut at once).
constexpr double kMaxWaitSeconds = 7 * 24 * 3600;

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop = true; }

void declare(po::options_description& opts) {
  const serve::ServerOptions d;
  add_checkpoint(opts);
  opts.add_options()("host", with_default<std::string>(d.host),
                     "address to listen on (loopback by default; 0.0.0.0 exposes the server to the network)")
      ("port", with_default<int>(d.port), "TCP port (0: any free port, printed at start)")
      ("api-key", po::value<std::string>(), "require 'Authorization: Bearer KEY' on every route but / and /health")
      ("api-key-file", po::value<std::string>(), "read the key from this file (keeps it out of the process list)")
      ("model-name", po::value<std::string>(),
       "the model's id in /v1/models and responses (default: the run directory's name)")
      ("any-model-name", po::bool_switch(),
       "serve requests whatever \"model\" they name (by default another name gets 404 model_not_found)")
      ("quiet", po::bool_switch(), "no access log (by default a line per request on stderr: method, path, status, "
                                   "tokens, ms)")
      ("slots", with_default<int64_t>(d.scheduler.slots), "requests decoded at once, each with its own KV cache")
      ("queue", with_default<int64_t>(d.scheduler.queue), "requests that may wait for a slot; more get 503")
      ("max-tokens", with_default<int64_t>(d.limits.max_tokens), "the largest max_tokens a request may ask for")
      ("max-prompt-tokens", with_default<int64_t>(d.limits.max_prompt_tokens),
       "the longest prompt, in tokens (a completion's model sees its last block_size; a chat whose prompt "
       "leaves no room for a reply in block_size gets 400 context_length_exceeded)")
      ("timeout", with_default<double>(d.limits.max_seconds),
       cat("seconds a request may decode before it is cut (at most ", kMaxWaitSeconds, ": a week)").c_str())
      ("max-body", with_default<int64_t>(int64_t(d.max_body)), "the largest request body, in bytes (413 beyond)")
      ("shutdown-grace", with_default<double>(d.shutdown_grace),
       cat("on SIGTERM or SIGINT, seconds running requests get to finish before they are cut (at most ",
           kMaxWaitSeconds, ")").c_str())
      ("no-batching", po::bool_switch(),
       "a thread per slot, each a token at a time, instead of one product per step for all slots (a baseline)");
  add_dtype(opts);
  add_weights(opts);
  add_threads(opts);
}

std::function<int()> prepare(const po::variables_map& vm) {
  apply_threads(vm);
  serve::ServerOptions o;
  o.host = vm["host"].as<std::string>();
  // Empty (an unset variable in --host "$HOST"), httplib would listen on ::1 while the
  // banner said http://:8080/.
  if (o.host.empty()) throw UsageError("--host is empty: give an address to listen on (127.0.0.1, 0.0.0.0, ::1)");
  o.port = vm["port"].as<int>();
  if (o.port < 0 || o.port > 65535) throw UsageError(cat("--port must be in [0, 65535], got ", o.port));
  if (vm.count("api-key") && vm.count("api-key-file")) throw UsageError("give --api-key or --api-key-file, not both");
  if (vm.count("api-key")) o.api_key = vm["api-key"].as<std::string>();
  if (vm.count("api-key-file")) {
    const std::string path = vm["api-key-file"].as<std::string>();
    try {
      o.api_key = read_file(path);
    } catch (const Error& e) {  // "[data] PATH: cannot open (...)": the option that named it instead
      const std::string_view why = e.what();
      throw UsageError(cat("--api-key-file ", why.starts_with("[data] ") ? why.substr(7) : why));
    }
    while (!o.api_key.empty() && (o.api_key.back() == '\n' || o.api_key.back() == '\r')) o.api_key.pop_back();
    if (o.api_key.empty()) throw UsageError("--api-key-file holds an empty key");
  }
  if (vm.count("api-key") && o.api_key.empty()) throw UsageError("--api-key is empty");
  o.scheduler.slots = positive<int64_t>(vm, "slots");
  o.scheduler.queue = non_negative<int64_t>(vm, "queue");
  o.scheduler.batched = !vm["no-batching"].as<bool>();
  o.limits.max_tokens = positive<int64_t>(vm, "max-tokens");
  o.limits.max_prompt_tokens = positive<int64_t>(vm, "max-prompt-tokens");
  o.limits.max_seconds = o.scheduler.max_seconds = positive<double>(vm, "timeout", kMaxWaitSeconds);
  o.max_body = size_t(positive<int64_t>(vm, "max-body"));
  o.shutdown_grace = non_negative<double>(vm, "shutdown-grace", kMaxWaitSeconds);
  const Precision dtype = dtype_option(vm);
  o.scheduler.weights = weights_option(vm, dtype);
  const std::string path = checkpoint_option(vm);
  auto ck = std::make_shared<ModelCheckpoint>(load_model(path));
  ck->model->eval();
  ck->model->set_precision(dtype);
  const serve::ModelCard card = serve::model_card(path, *ck);
  o.model_name = card.name;
  if (vm.count("model-name")) {
    o.model_name = vm["model-name"].as<std::string>();
    if (o.model_name.empty()) throw UsageError("--model-name is empty: give the name clients send as \"model\"");
  }
  o.any_model_name = vm["any-model-name"].as<bool>();
  o.created = card.created;
  o.default_prompt = card.prompt;
  if (!vm["quiet"].as<bool>())
    o.access_log = [](const std::string& line) { std::fprintf(stderr, "folio serve: %s\n", line.c_str()); };
  auto server = std::make_shared<serve::Server>(*ck, o);
  const int port = server->bind();  // a busy port is a usage error: exit 2
  return [ck, server, o, port] {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not a death
    std::printf("folio serve: %s (%s), %s weights, %lld slots%s, on http://%s:%d/\n", o.model_name.c_str(),
                ck->tokenizer->describe().c_str(), nn::to_string(o.scheduler.weights), (long long)o.scheduler.slots,
                o.scheduler.batched ? " batched" : " (a thread each)", o.host.c_str(), port);
    std::fflush(stdout);
    std::thread watcher([&] {
      while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::printf("folio serve: stopping (running requests get %gs)\n", o.shutdown_grace);
      std::fflush(stdout);
      server->stop();
    });
    server->listen();
    g_stop = true;  // listen ended on its own: let the watcher go
    watcher.join();
    const serve::SchedulerStats s = server->stats();
    std::printf("folio serve: stopped after %lld requests\n", (long long)s.served);
    return 0;
  };
}

}  // namespace

const Command kServe = {"serve", "serve a checkpoint over HTTP (OpenAI API) with a page to explore attention",
                        "Serves a checkpoint (--checkpoint: a run directory or a .safetensors file) over\n"
                        "HTTP: POST /v1/completions and POST /v1/chat/completions (OpenAI's shapes,\n"
                        "streaming with \"stream\": true; chat through a plain speaker-turn template),\n"
                        "GET /v1/models, GET /health, POST /tokenize, POST /detokenize, POST /v1/attention,\n"
                        "and at / a page to write a prompt, watch the text stream and see what every head\n"
                        "attends to. Listens on 127.0.0.1 unless --host says otherwise.",
                        declare, prepare};

}  // namespace folio::cli
