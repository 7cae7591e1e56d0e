// The gate before folio serve's HTTP threads (serve/connection_gate.h), in process:
// header limits (431), slow clients that cannot hold the threads and are cut (408), a
// flood of idle connections that evicts itself, and the requests a gate must pass
// through whole: keep-alive, pipelined, "Expect: 100-continue".
#include <poll.h>

#include "serve_support.h"

namespace folio {
namespace {

using namespace serve_test;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Sends `data` on a new connection and returns what comes back until the server closes
// it or `wait` passes.
std::string send_and_read(int port, const std::string& data, milliseconds wait = milliseconds(3000)) {
  const int fd = connect_to(port);
  ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
  std::string got;
  const auto end = Clock::now() + wait;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now()).count();
    if (left <= 0 || ::poll(&p, 1, int(left)) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, size_t(n));
  }
  ::close(fd);
  return got;
}

// A request with `n` headers besides "Connection: close".
std::string with_headers(int n, size_t value_bytes = 1) {
  std::string head = "GET /health HTTP/1.1\r\nConnection: close\r\n";
  for (int i = 0; i < n; ++i) head += cat("X-H", i, ": ", std::string(value_bytes, 'v'), "\r\n");
  return head + "\r\n";
}

TEST_F(ServeRoutes, HeadersBeyondTheLimitsGet431) {
  serve::ServerOptions o;
  o.max_headers = 20;
  start(o);
  EXPECT_EQ(send_and_read(port, with_headers(19)).rfind("HTTP/1.1 200", 0), 0u);
  for (const std::string& head : {with_headers(20), with_headers(5, 8000)}) {  // too many; too many bytes
    const std::string got = send_and_read(port, head);
    ASSERT_EQ(got.rfind("HTTP/1.1 431", 0), 0u) << got.substr(0, 100);
    const json error = json::parse(got.substr(got.find("\r\n\r\n") + 4));
    expect_openai_error(error);
    EXPECT_NE(error["error"]["message"].get<std::string>().find("20 headers"), std::string::npos);
  }
  EXPECT_EQ(health()["status"], "ok");
}

// Two HTTP threads, twelve clients that send part of a request and stall: the threads
// stay free for the others (a thread per connection would wait out read_timeout, 3 s,
// before it could serve anyone), and the slow requests get 408 once it has passed.
TEST_F(ServeRoutes, SlowClientsDoNotHoldTheThreads) {
  serve::ServerOptions o;
  o.http_threads = 2;
  o.read_timeout = 3;
  start(o);
  std::vector<int> slow;
  for (int i = 0; i < 12; ++i) {
    slow.push_back(connect_to(port));
    const std::string part = i % 2 ? "GET /health HTTP/1.1\r\nX-Slow: "
                                   : "POST /v1/completions HTTP/1.1\r\nContent-Length: 30\r\n\r\n{\"pro";
    ::send(slow.back(), part.data(), part.size(), MSG_NOSIGNAL);
  }
  std::this_thread::sleep_for(milliseconds(100));
  const auto t0 = Clock::now();
  EXPECT_EQ(health()["status"], "ok");
  auto r = client().Post("/v1/completions", R"({"prompt": "abc", "max_tokens": 5})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_LT(Clock::now() - t0, milliseconds(1500));  // generous: sanitizer builds on a busy machine
  const json h = health();
  EXPECT_EQ(h["connections_waiting"], 12) << h;  // the slow ones, not /health's own
  for (int fd : slow) {
    char buf[256] = {};
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 6000), 1) << "a slow request was never cut";
    const ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
    EXPECT_EQ(std::string(buf, size_t(std::max<ssize_t>(n, 0))).rfind("HTTP/1.1 408", 0), 0u) << buf;
    ::close(fd);
  }
  EXPECT_LT(Clock::now() - t0, milliseconds(6000));
}

// More idle connections than may wait: the longest-waiting are closed, the server answers.
TEST_F(ServeRoutes, AFloodOfIdleConnectionsEvictsItself) {
  serve::ServerOptions o;
  o.max_waiting = 4;
  start(o);
  std::vector<int> idle;
  for (int i = 0; i < 10; ++i) idle.push_back(connect_to(port));
  std::vector<bool> closed(idle.size());
  auto count_closed = [&] {
    for (size_t i = 0; i < idle.size(); ++i) {
      pollfd p{idle[i], POLLIN, 0};
      char byte;
      if (!closed[i] && ::poll(&p, 1, 0) == 1 && ::recv(idle[i], &byte, 1, 0) <= 0) closed[i] = true;
    }
    return std::count(closed.begin(), closed.end(), true);
  };
  for (const auto t0 = Clock::now(); count_closed() < 6 && Clock::now() - t0 < milliseconds(3000);)
    std::this_thread::sleep_for(milliseconds(10));
  std::this_thread::sleep_for(milliseconds(100));  // and no more than those
  EXPECT_EQ(count_closed(), 6);
  EXPECT_TRUE(closed[0] && !closed[9]);  // the longest-waiting went first
  EXPECT_EQ(health()["status"], "ok");  // its own connection evicts one more idle one
  for (int fd : idle) ::close(fd);
}

// What the gate gathers reaches httplib whole: two pipelined requests on one
// connection, both answered in order; a body sent after "100 Continue".
TEST_F(ServeRoutes, PipelinedAndExpectContinueRequestsPassWhole) {
  start({});
  const std::string body = R"({"content": "abc"})";
  const std::string tokenize = cat("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
                                   "Content-Length: ", body.size(), "\r\n\r\n", body);
  const std::string got = send_and_read(port, tokenize + "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n");
  const size_t second = got.find("HTTP/1.1 200", 1);
  ASSERT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  ASSERT_NE(second, std::string::npos) << got;
  EXPECT_NE(got.substr(0, second).find("\"tokens\""), std::string::npos) << got;
  EXPECT_NE(got.substr(second).find("\"slots_idle\""), std::string::npos) << got;

  const int fd = connect_to(port);
  const std::string head = cat("POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n",
                               "Content-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n");
  ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  char buf[4096] = {};
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 3000), 1);
  ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
  EXPECT_EQ(std::string(buf, size_t(std::max<ssize_t>(n, 0))).rfind("HTTP/1.1 100", 0), 0u) << buf;
  ::send(fd, body.data(), body.size(), MSG_NOSIGNAL);
  std::string answer;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) answer.append(buf, size_t(n));
  ::close(fd);
  EXPECT_NE(answer.find("\"tokens\""), std::string::npos) << answer;
}

}  // namespace
}  // namespace folio
