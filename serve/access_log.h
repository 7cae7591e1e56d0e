#pragma once
// folio serve's access log: one line per request, "GET /v1/models 200 tokens=- ms=0.4",
// written when the response's last byte has gone (a stream's line comes at its end,
// with the tokens it generated).
//
// httplib runs a request (routing, handler, writing the response, then its logger) on
// one pool thread, so the request's start and its token count live in thread-local
// slots between begin() and end(): no table keyed by request, nothing to clean up.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace folio::serve {

class AccessLog {
 public:
  using Sink = std::function<void(const std::string& line)>;  // gets the line without '\n'
  explicit AccessLog(Sink sink) : sink_(std::move(sink)) {}
  bool on() const { return bool(sink_); }
  // On the request's thread, as routing starts.
  static void begin();
  // On the same thread, once the completion has ended (the count of tokens it generated).
  static void tokens(int64_t n);
  // After the response is written; requests httplib refused before routing (a
  // malformed request line) have no start, and log "ms=-".
  void end(const httplib::Request& req, const httplib::Response& res) const;

 private:
  Sink sink_;
};

// The line; control characters and bytes >= 0x7f in the path come out as %XX (the path
// is the client's, already percent-decoded: a "%0a" in it must not start a new line),
// and a long path is cut. tokens < 0 and ms < 0: "-".
std::string access_line(std::string_view method, std::string_view path, int status, int64_t tokens, double ms);

}  // namespace folio::serve
