#pragma once
// folio serve's HTTP server: the routes, authentication, limits and errors, over
// cpp-httplib, with the slots (serve/scheduler.h) behind the completions, and a gate
// (serve/connection_gate.h) that gathers each request before a thread runs it.
//
// Routes: GET / (the page), GET /favicon.ico, GET /health, GET /v1/models,
// POST /v1/completions and POST /v1/chat/completions (stream: Server-Sent Events),
// POST /tokenize, POST /detokenize, POST /v1/attention. Another method on one of these
// paths gets 405 with an Allow header.
// With an API key every route but /, /favicon.ico and /health wants
// "Authorization: Bearer KEY".
// No route reads or writes a file: the page is compiled in, and no request field is
// ever a path.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "io/checkpoint.h"
#include "serve/access_log.h"
#include "serve/api.h"
#include "serve/scheduler.h"

namespace folio::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless asked
  int port = 8080;                 // 0: any free port (tests)
  std::string api_key;             // empty: no key
  std::string model_name;          // what /v1/models and responses call the model
  // A request naming another model gets 404 model_not_found, as OpenAI answers; true
  // serves it whatever it names. A request without "model" is served.
  bool any_model_name = false;
  int64_t created = 0;         // /v1/models' "created": Unix seconds (the checkpoint's mtime)
  std::string default_prompt;  // /v1/models' meta.prompt: the page's prompt until one is typed
  AccessLog::Sink access_log;  // a line per request (serve/access_log.h); empty: none
  ApiLimits limits;
  SchedulerOptions scheduler;
  size_t max_body = size_t(2) << 20;  // bytes; larger bodies get 413
  int http_threads = 0;               // requests run at once (0: slots + queue + 32)
  double shutdown_grace = 5;          // seconds running requests get to finish on stop()
  double read_timeout = 5;            // seconds for a whole request to arrive (408 after), for one
                                      // read or write, and for an idle keep-alive connection
  size_t max_header_bytes = size_t(32) << 10;  // request line and headers; 431 beyond
  int64_t max_headers = 100;                   // 431 beyond
  int64_t max_waiting = 512;  // connections waiting for their request at once; the oldest go beyond
};

class Server {
 public:
  Server(const ModelCheckpoint& model, ServerOptions options);
  ~Server();
  // Binds the address; returns the port. Throws "[serve] ..." when it cannot.
  int bind();
  // Serves until stop(); returns once the listener and the slots have stopped.
  void listen();
  // Refuses new requests (503), gives running ones shutdown_grace seconds, cuts the
  // rest, closes the listener. Safe to call from another thread, more than once.
  void stop();
  SchedulerStats stats();

 private:
  struct Routes;  // keeps httplib.h out of this header
  std::unique_ptr<Routes> routes_;
};

// Equal keys, in time that depends on their lengths only, not on where they differ.
bool same_key(std::string_view a, std::string_view b);

}  // namespace folio::serve
