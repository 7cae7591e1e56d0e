#include "serve/server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>

#include "base/error.h"
#include "serve/page.h"
#include "serve/routes.h"

namespace folio::serve {

void reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void reply_error(httplib::Response& res, const ApiError& e) {
  reply(res, e.status, error_json(e));
  if (e.status == 503) res.set_header("Retry-After", "1");
  if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
}

namespace {

using std::chrono::milliseconds;

// What a browser fetches without being asked: the page and its icon.
bool needs_key(const std::string& path) { return path != "/" && path != "/health" && path != "/favicon.ico"; }

// The page links the same icon inline; this answers clients that ask for the file.
constexpr std::string_view kFavicon =
    "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'><rect width='16' height='16' rx='3' "
    "fill='#243447'/><path d='M4 3h8v2H6.5v2H11v2H6.5v4H4z' fill='#fff'/></svg>";

GateOptions gate_options(const ServerOptions& o) {
  GateOptions g;
  g.max_head_bytes = o.max_header_bytes;
  g.max_headers = o.max_headers;
  g.max_body = o.max_body;
  g.request_timeout = g.keep_alive_timeout = g.io_timeout = o.read_timeout;
  g.max_waiting = o.max_waiting;
  // Threads run whole requests only: every slot and queued request may hold one while
  // it streams or waits, and the rest answer everything else.
  g.threads = o.http_threads > 0 ? o.http_threads
                                  : int(std::min<int64_t>(o.scheduler.slots + o.scheduler.queue + 32, INT_MAX));
  return g;
}

// httplib's default sets SO_REUSEPORT on the listener, which lets a second server bind
// the same port and take half the connections (past this one's API key). SO_REUSEADDR
// alone still allows a quick restart over connections in TIME_WAIT.
void listener_options(socket_t sock) {
  const int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
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

Server::Routes::Routes(const ModelCheckpoint& m, ServerOptions o)
    : model(m),
      options(std::move(o)),
      scheduler(m, options.scheduler),
      http(gate_options(options),
           [](int status, const std::string& message) { return error_json(ApiError(status, message)); }),
      log(options.access_log) {}

json Server::Routes::health() {
  const SchedulerStats s = scheduler.stats();
  return {{"status", stopping ? "stopping" : "ok"},
          {"slots_idle", s.slots - s.busy},
          {"slots_processing", s.busy},
          {"queued", s.queued},
          {"served", s.served},
          {"connections_waiting", http.gate_stats().waiting}};
}

json Server::Routes::models() {
  const nn::GPTConfig& c = model.model->config();
  return {{"object", "list"},
          {"data",
           {{{"id", options.model_name},
             {"object", "model"},
             {"created", options.created},
             {"owned_by", "folio"},
             {"meta",
              {{"n_layer", c.n_layer},
               {"n_head", c.n_head},
               {"n_embd", c.n_embd},
               {"block_size", c.block_size},
               {"vocab_size", c.vocab_size},
               {"tokenizer", model.tokenizer->describe()},
               {"step", model.step},
               {"prompt", options.default_prompt}}}}}}};
}

void Server::Routes::check_model(const std::string& requested) const {
  if (requested.empty() || options.any_model_name || requested == options.model_name) return;
  throw ApiError(404, cat("the model '", requested, "' does not exist: this server serves '", options.model_name, "'"),
                 "model", "invalid_request_error", "model_not_found");
}

void Server::Routes::get(const std::string& path, httplib::Server::Handler handler) {
  allowed[path] = "GET, HEAD";
  http.Get(path, std::move(handler));
}

void Server::Routes::post(const std::string& path, httplib::Server::Handler handler) {
  allowed[path] = "POST";
  http.Post(path, std::move(handler));
}

void Server::Routes::install() {
  // Timeouts, header limits and threads are the gate's (serve/connection_gate.h).
  http.set_payload_max_length(options.max_body);
  http.set_tcp_nodelay(true);  // a streamed token is a few bytes: send it now
  http.set_socket_options(listener_options);
  if (log.on()) http.set_logger([this](const httplib::Request& req, const httplib::Response& res) { log.end(req, res); });

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    AccessLog::begin();
    if (options.api_key.empty() || !needs_key(req.path)) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    // The scheme is case-insensitive (RFC 9110): "bearer KEY" is the right key too.
    const std::string_view prefix = "bearer ";
    const bool bearer = auth.size() >= prefix.size() &&
                        std::equal(prefix.begin(), prefix.end(), auth.begin(),
                                   [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
    if (!bearer || !same_key(std::string_view(auth).substr(prefix.size()), options.api_key)) {
      // A wrong key is OpenAI's invalid_api_key; a missing or malformed header, its null code.
      reply_error(res, ApiError(401,
                                auth.empty() ? "no API key: send the header Authorization: Bearer KEY"
                                : bearer     ? "wrong API key"
                                             : "the Authorization header is not Bearer KEY: send the key as "
                                               "Authorization: Bearer KEY",
                                "", "", bearer ? "invalid_api_key" : ""));
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
    if (const auto it = allowed.find(req.path); res.status == 404 && it != allowed.end()) {
      res.status = 405;
      res.set_header("Allow", it->second);
      message = cat(req.path, " takes ", it->second, ", not ", req.method);
    }
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

  get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(page_html()), "text/html; charset=utf-8");
  });
  get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "max-age=86400");
    res.set_content(std::string(kFavicon), "image/svg+xml");
  });
  get("/health", [this](const httplib::Request&, httplib::Response& res) {
    reply(res, stopping ? 503 : 200, dump(health()));
  });
  get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { reply(res, 200, dump(models())); });
  post("/v1/completions",
       [this](const httplib::Request& req, httplib::Response& res) { completions(req, res, false); });
  post("/v1/chat/completions",
       [this](const httplib::Request& req, httplib::Response& res) { completions(req, res, true); });
  post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      const TokenizeRequest r = parse_tokenize(req.body, *model.tokenizer, options.limits);
      reply(res, 200, tokenize_json(r, *model.tokenizer));
    } catch (const ApiError& e) {
      reply_error(res, e);
    }
  });
  post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
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
  post("/v1/attention", [this](const httplib::Request& req, httplib::Response& res) { attention(req, res); });
}

Server::Server(const ModelCheckpoint& model, ServerOptions options)
    : routes_(std::make_unique<Routes>(model, std::move(options))) {
  routes_->install();
}

Server::~Server() { stop(); }

int Server::bind() {
  const ServerOptions& o = routes_->options;
  errno = 0;
  const int port = o.port == 0 ? routes_->http.bind_to_any_port(o.host)
                               : (routes_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0 && errno == EADDRINUSE)
    fail("serve", "--port ", o.port, ": port in use on ", o.host, " (another server listens there): stop it or give "
         "another --port (0: any free port)");
  if (port < 0)
    fail("serve", "cannot listen on --host ", o.host, " --port ", o.port, ": ",
         errno ? std::strerror(errno) : "not an address of this machine");
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
