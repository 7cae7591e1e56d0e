#include "serve/server.h"

#include <atomic>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "autograd/error.h"
#include "serve/chat.h"
#include "serve/connection_gate.h"
#include "serve/page.h"

namespace folio::serve {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

void reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void reply_error(httplib::Response& res, const ApiError& e) {
  reply(res, e.status, error_json(e));
  if (e.status == 503) res.set_header("Retry-After", "1");
  if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

bool needs_key(const std::string& path) { return path != "/" && path != "/health"; }

GateOptions gate_options(const ServerOptions& o) {
  GateOptions g;
  g.max_head_bytes = o.max_header_bytes;
  g.max_headers = o.max_headers;
  g.max_body = o.max_body;
  g.request_timeout = g.keep_alive_timeout = g.io_timeout = o.read_timeout;
  g.max_waiting = o.max_waiting;
  // Threads run whole requests only: every slot and queued request may hold one while
  // it streams or waits, and the rest answer everything else.
  g.threads = o.http_threads > 0 ? o.http_threads : int(o.scheduler.slots + o.scheduler.queue + 32);
  return g;
}

}  // namespace

bool same_key(std::string_view a, std::string_view b) {
  // Every byte of the longer is looked at whatever the contents; only the lengths
  // (not secret in any useful way: the key's length bounds nothing) change the time.
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= unsigned(x ^ y);
  }
  return diff == 0;
}

struct Server::Routes {
  Routes(const ModelCheckpoint& m, ServerOptions o)
      : model(m),
        options(std::move(o)),
        scheduler(m, model_mutex, options.scheduler),
        http(gate_options(options), [](int status, const std::string& message) {
          return error_json(ApiError(status, message));
        }) {}
  const ModelCheckpoint& model;
  const ServerOptions options;
  std::mutex model_mutex;  // the model's own forward passes (prefill, attention)
  Scheduler scheduler;
  GatedServer http;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_id{1};
  std::atomic<int64_t> in_flight{0};  // completions still answering (streams included)
  std::once_flag stopped;
  // Held by a completion until its last byte is written.
  std::shared_ptr<void> flight() {
    ++in_flight;
    return {nullptr, [this](void*) { --in_flight; }};
  }

  void install();
  // /v1/completions (chat false) and /v1/chat/completions (chat true): the same slots,
  // the same limits and errors, each in its own shape.
  void completions(const httplib::Request& req, httplib::Response& res, bool chat);
  void stream(std::shared_ptr<Job> job, httplib::Response& res, std::shared_ptr<void> flying, bool chat);
  void attention(const httplib::Request& req, httplib::Response& res);
  json health();
};

json Server::Routes::health() {
  const SchedulerStats s = scheduler.stats();
  return {{"status", stopping ? "stopping" : "ok"},
          {"slots_idle", s.slots - s.busy},
          {"slots_processing", s.busy},
          {"queued", s.queued},
          {"served", s.served},
          {"connections_waiting", http.gate_stats().waiting}};
}

void Server::Routes::install() {
  // Timeouts, header limits and threads are the gate's (serve/connection_gate.h).
  http.set_payload_max_length(options.max_body);
  http.set_tcp_nodelay(true);  // a streamed token is a few bytes: send it now

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options.api_key.empty() || !needs_key(req.path)) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string_view prefix = "Bearer ";
    if (auth.size() < prefix.size() || auth.compare(0, prefix.size(), prefix) != 0 ||
        !same_key(std::string_view(auth).substr(prefix.size()), options.api_key)) {
      reply_error(res, ApiError(401, auth.empty() ? "no API key: send the header Authorization: Bearer KEY"
                                                  : "wrong API key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // What httplib itself refuses (no route, a body over the limit, a malformed
  // request) gets OpenAI's error object too.
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = cat("HTTP ", res.status);
    if (res.status == 404) message = cat("no route ", req.method, " ", req.path);
    if (res.status == 413) message = cat("the body exceeds this server's limit of ", options.max_body, " bytes");
    if (res.status == 400) message = "malformed HTTP request";
    reply_error(res, ApiError(res.status, message));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    reply_error(res, ApiError(500, message));
  });

  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(page_html()), "text/html; charset=utf-8");
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    reply(res, stopping ? 503 : 200, dump(health()));
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const nn::GPTConfig& c = model.model->config();
    reply(res, 200,
          dump({{"object", "list"},
                {"data",
                 {{{"id", options.model_name},
                   {"object", "model"},
                   {"created", 0},
                   {"owned_by", "folio"},
                   {"meta",
                    {{"n_layer", c.n_layer},
                     {"n_head", c.n_head},
                     {"n_embd", c.n_embd},
                     {"block_size", c.block_size},
                     {"vocab_size", c.vocab_size},
                     {"tokenizer", model.tokenizer->describe()},
                     {"step", model.step}}}}}}}));
  });
  http.Post("/v1/completions",
            [this](const httplib::Request& req, httplib::Response& res) { completions(req, res, false); });
  http.Post("/v1/chat/completions",
            [this](const httplib::Request& req, httplib::Response& res) { completions(req, res, true); });
  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      const auto ids = parse_tokenize(req.body, *model.tokenizer, options.limits);
      json pieces = json::array();
      for (int32_t id : ids) pieces.push_back(visible_token(model.tokenizer->token_bytes(id)));
      reply(res, 200, dump({{"tokens", ids}, {"pieces", pieces}}));
    } catch (const ApiError& e) {
      reply_error(res, e);
    }
  });
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      const auto ids = parse_detokenize(req.body, *model.tokenizer);
      TokenStream text(*model.tokenizer);  // whole characters, so the JSON is valid UTF-8
      std::string content;
      for (int32_t id : ids) content += text.push(id);
      reply(res, 200, dump({{"content", content + text.finish()}}));
    } catch (const ApiError& e) {
      reply_error(res, e);
    }
  });
  http.Post("/v1/attention", [this](const httplib::Request& req, httplib::Response& res) { attention(req, res); });
}

void Server::Routes::completions(const httplib::Request& req, httplib::Response& res, bool chat) {
  auto flying = flight();
  std::shared_ptr<Job> job;
  bool streaming = false;
  try {
    if (stopping) throw ApiError(503, "the server is stopping");
    CompletionRequest r = chat ? parse_chat_completion(req.body, *model.tokenizer, options.limits)
                               : parse_completion(req.body, *model.tokenizer, options.limits);
    streaming = r.stream;
    job = scheduler.submit(std::move(r));
    if (!job) throw ApiError(503, cat("all ", options.scheduler.slots, " slots are busy and ", options.scheduler.queue,
                                      " requests wait already: retry later"));
  } catch (const ApiError& e) {
    return reply_error(res, e);
  }
  if (streaming) return stream(job, res, std::move(flying), chat);
  // Wait for a slot here, where a failure can still be answered with a 503.
  auto text = std::make_shared<std::string>();
  for (;;) {
    const Job::Update u = job->wait(milliseconds(100));
    *text += u.text;
    if (u.done && u.finish_reason == "error") return reply_error(res, ApiError(503, u.error));
    if (u.done || job->started()) break;
  }
  const std::string id = cat(chat ? "chatcmpl-" : "cmpl-", next_id++), model_name = options.model_name;
  res.set_chunked_content_provider(
      "application/json",
      [job, text, id, model_name, flying, chat](size_t, httplib::DataSink& sink) {
        const Job::Update u = job->wait(milliseconds(500), false);
        *text += u.text;
        if (!u.done) {
          // A space, which JSON ignores before a value, every half second of decoding:
          // a client that has gone makes the write fail, and the slot is freed.
          if (sink.write(" ", 1)) return true;
          job->cancel();
          return false;
        }
        const Usage usage{job->prompt_tokens(), job->completion_tokens()};
        const std::string body =
            u.finish_reason == "error" ? error_json(ApiError(500, u.error))
            : chat ? chat_completion_json(id, std::time(nullptr), model_name, *text, u.finish_reason, usage)
                   : completion_json(id, std::time(nullptr), model_name, *text, u.finish_reason, usage);
        if (!sink.write(body.data(), body.size())) return false;
        sink.done();
        return true;
      },
      [job](bool success) {
        if (!success) job->cancel();
      });
}

void Server::Routes::stream(std::shared_ptr<Job> job, httplib::Response& res, std::shared_ptr<void> flying,
                            bool chat) {
  const std::string id = cat(chat ? "chatcmpl-" : "cmpl-", next_id++), model_name = options.model_name;
  const int64_t created = std::time(nullptr);
  // A chat stream opens with the assistant's role, as OpenAI's does.
  auto first = std::make_shared<bool>(chat);
  auto chunk = [id, model_name, created, chat, first](const std::string& text, const std::string& finish,
                                                       const Usage* usage) {
    if (!chat) return completion_chunk(id, created, model_name, text, finish, usage);
    const bool opening = std::exchange(*first, false);
    return chat_chunk(id, created, model_name, text, opening, finish, usage);
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, chunk, flying](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& data) {
          const std::string event = "data: " + data + "\n\n";
          if (sink.write(event.data(), event.size())) return true;
          job->cancel();  // the client has gone: free the slot
          return false;
        };
        const Job::Update u = job->wait(milliseconds(1000));
        if (u.text.empty() && !u.done) {
          // Nothing for a second (queued, or a slow step): an SSE comment, which
          // clients skip, finds out whether the client is still there.
          const std::string ping = ": waiting\n\n";
          if (sink.write(ping.data(), ping.size())) return true;
          job->cancel();
          return false;
        }
        if (!u.text.empty() && !send(chunk(u.text, "", nullptr))) return false;
        if (!u.done) return true;
        if (u.finish_reason == "error") {
          if (!send(error_json(ApiError(503, u.error)))) return false;
        } else {
          const Usage usage{job->prompt_tokens(), job->completion_tokens()};
          if (!send(chunk("", u.finish_reason, &usage))) return false;
        }
        if (!send("[DONE]")) return false;
        sink.done();
        return true;
      },
      [job](bool success) {
        if (!success) job->cancel();
      });
}

void Server::Routes::attention(const httplib::Request& req, httplib::Response& res) {
  const nn::GPTConfig& c = model.model->config();
  std::vector<int32_t> ids;
  try {
    ids = parse_attention(req.body, *model.tokenizer, c.block_size);
  } catch (const ApiError& e) {
    return reply_error(res, e);
  }
  const int64_t T = int64_t(ids.size());
  std::vector<Tensor> weights;  // per layer (1, n_head, T, T), as folio attention reads them
  {
    std::lock_guard lock(model_mutex);
    NoGradGuard no_grad;
    model.model->forward(ids, 1, T, {}, &weights);
  }
  json tokens = json::array();
  for (int32_t id : ids) tokens.push_back({{"id", id}, {"text", visible_token(model.tokenizer->token_bytes(id))}});
  // [layer][head][query][key], each query's row up to itself (the rest is masked to 0).
  json layers = json::array();
  for (int64_t l = 0; l < c.n_layer; ++l) {
    json heads = json::array();
    for (int64_t h = 0; h < c.n_head; ++h) {
      const float* w = weights[size_t(l)].data() + h * T * T;  // (T, T)
      json rows = json::array();
      for (int64_t q = 0; q < T; ++q) {
        json row = json::array();
        for (int64_t k = 0; k <= q; ++k) row.push_back(std::round(double(w[q * T + k]) * 1e5) / 1e5);
        rows.push_back(std::move(row));
      }
      heads.push_back(std::move(rows));
    }
    layers.push_back(std::move(heads));
  }
  reply(res, 200,
        dump({{"model", options.model_name},
              {"n_layer", c.n_layer},
              {"n_head", c.n_head},
              {"tokens", tokens},
              {"attention", layers}}));
}

Server::Server(const ModelCheckpoint& model, ServerOptions options)
    : routes_(std::make_unique<Routes>(model, std::move(options))) {
  routes_->install();
}

Server::~Server() { stop(); }

int Server::bind() {
  const ServerOptions& o = routes_->options;
  const int port = o.port == 0 ? routes_->http.bind_to_any_port(o.host) : (routes_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) fail("serve", "cannot listen on ", o.host, ":", o.port, " (in use, or not an address of this machine)");
  routes_->http.widen_backlog(1024);
  return port;
}

void Server::listen() { routes_->http.listen_after_bind(); }

void Server::stop() {
  std::call_once(routes_->stopped, [this] {
    routes_->stopping = true;
    routes_->scheduler.stop(milliseconds(int64_t(routes_->options.shutdown_grace * 1000)));
    // Every job has ended; let their last chunks out before the sockets close.
    for (int i = 0; i < 100 && routes_->in_flight > 0; ++i) std::this_thread::sleep_for(milliseconds(10));
    routes_->http.stop();
    routes_->http.stop_gate();
  });
}

SchedulerStats Server::stats() { return routes_->scheduler.stats(); }

}  // namespace folio::serve
