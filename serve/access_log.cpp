#include "serve/access_log.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <optional>

namespace folio::serve {
namespace {

using Clock = std::chrono::steady_clock;
thread_local std::optional<Clock::time_point> t_started;
thread_local int64_t t_tokens = -1;

constexpr size_t kMaxPath = 200;

}  // namespace

void AccessLog::begin() {
  t_started = Clock::now();
  t_tokens = -1;
}

void AccessLog::tokens(int64_t n) { t_tokens = n; }

void AccessLog::end(const httplib::Request& req, const httplib::Response& res) const {
  const double ms =
      t_started ? std::chrono::duration<double, std::milli>(Clock::now() - *t_started).count() : -1.0;
  const int64_t tokens = t_tokens;
  t_started.reset();
  t_tokens = -1;
  if (sink_) sink_(access_line(req.method, req.path, res.status, tokens, ms));
}

std::string access_line(std::string_view method, std::string_view path, int status, int64_t tokens, double ms) {
  std::string line;
  auto put = [&line](std::string_view s) {
    for (unsigned char c : s) {
      if (c > 0x20 && c < 0x7f && c != '%') {
        line += char(c);
      } else {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", c);
        line += hex;
      }
    }
  };
  put(method.substr(0, 16));
  line += ' ';
  put(path.substr(0, kMaxPath));
  if (path.size() > kMaxPath) line += "...";
  char tail[96];
  std::snprintf(tail, sizeof tail, " %d tokens=", status);
  line += tail;
  line += tokens < 0 ? std::string("-") : std::to_string(tokens);
  if (ms < 0) {
    line += " ms=-";
  } else {
    std::snprintf(tail, sizeof tail, " ms=%.1f", ms);
    line += tail;
  }
  return line;
}

}  // namespace folio::serve
