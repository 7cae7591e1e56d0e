#pragma once
// Inside folio serve's Server (serve/server.h): its state and the handlers, shared by
// serve/server.cpp (the small routes, authentication, errors, the listener's life) and
// serve/completions.cpp (the completions, their streams, and attention).
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/connection_gate.h"
#include "serve/json_fields.h"
#include "serve/server.h"

namespace folio::serve {

using json = nlohmann::json;

void reply(httplib::Response& res, int status, const std::string& body);
void reply_error(httplib::Response& res, const ApiError& e);
using fields::dump;  // a response's JSON text (json_fields.h)

struct Server::Routes {
  Routes(const ModelCheckpoint& m, ServerOptions o);
  const ModelCheckpoint& model;
  const ServerOptions options;
  std::mutex model_mutex;  // the model's own forward passes (the attention route's)
  Scheduler scheduler;
  GatedServer http;
  AccessLog log;
  std::map<std::string, std::string> allowed;  // path -> its methods, for 405's Allow header
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
  void get(const std::string& path, httplib::Server::Handler handler);
  void post(const std::string& path, httplib::Server::Handler handler);
  // ApiError 404 model_not_found unless `requested` is "" or this server's name (or
  // options.any_model_name).
  void check_model(const std::string& requested) const;
  // /v1/completions (chat false) and /v1/chat/completions (chat true): the same slots,
  // the same limits and errors, each in its own shape.
  void completions(const httplib::Request& req, httplib::Response& res, bool chat);
  void stream(std::shared_ptr<Job> job, httplib::Response& res, std::shared_ptr<void> flying, bool chat);
  void attention(const httplib::Request& req, httplib::Response& res);
  json health();
  json models();
};

}  // namespace folio::serve
