#pragma once
// cpp-httplib's server, with its requests gathered before a thread is spent on them.
//
// cpp-httplib gives each accepted connection a pool thread that then waits for the
// request, with a timeout per read but none for the whole head, and no bound on the
// number of headers. So a few hundred clients trickling a byte every few seconds, or
// one sending headers without end, could hold every thread (and the memory) while
// everyone else waited. Here one thread polls every connection that is between
// requests and reads what it sends into a buffer, until the request line, the headers
// and a body of declared length have all arrived; only then does a pool thread run
// the request (httplib's own parsing and routing, on the buffered bytes). A keep-alive
// connection comes back to the poller after each request rather than idling on a thread.
//
// The poller enforces, without touching the library:
//   - the head (request line + headers) within max_head_bytes and max_headers: 431;
//   - the whole request (head and body) within request_timeout of its first byte: 408,
//     and an idle keep-alive connection closed after keep_alive_timeout;
//   - at most max_waiting connections between requests: beyond, the longest-waiting
//     one is closed (a flood of slow clients evicts itself, not the quick ones).
// Bodies sent chunked, or after "Expect: 100-continue", are read on the pool thread
// as httplib does (a read timeout per read).
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace folio::serve {

struct GateOptions {
  size_t max_head_bytes = size_t(32) << 10;  // request line and headers
  int64_t max_headers = 100;
  size_t max_body = size_t(2) << 20;  // bodies up to this are gathered before a thread runs the request
  double request_timeout = 5;         // seconds from a request's first byte to its last
  double keep_alive_timeout = 5;      // idle seconds between requests
  double io_timeout = 5;              // a pool thread's wait for one read or write
  int64_t max_waiting = 512;          // connections between requests at once
  int64_t max_requests_per_connection = 100;
  int threads = 8;                    // pool threads that run complete requests
};

struct GateStats {
  int64_t waiting = 0;        // connections between requests now
  int64_t too_large = 0;      // heads refused with 431
  int64_t timed_out = 0;      // requests cut with 408
  int64_t evicted = 0;        // connections closed because max_waiting were waiting
};

class GatedServer : public httplib::Server {
 public:
  // error_body(status, message): the body of a 408 or 431 (JSON).
  GatedServer(GateOptions options, std::function<std::string(int, const std::string&)> error_body);
  ~GatedServer() override;
  GatedServer(const GatedServer&) = delete;
  GatedServer& operator=(const GatedServer&) = delete;
  // After bind: httplib listens with a backlog of 5, so a burst of connections beyond
  // that waits for the client's SYN retry (a second or more). Linux takes a second
  // listen() on the socket as a new backlog.
  void widen_backlog(int backlog);
  // Closes every waiting connection and joins the poller and the pool (after stop()).
  void stop_gate();
  GateStats gate_stats();

 private:
  using Clock = std::chrono::steady_clock;
  struct Connection {
    int fd = -1;
    std::string buffer;          // received, not yet taken by a request
    Clock::time_point since;     // when it began to wait (the eviction order)
    Clock::time_point deadline;  // for the request's last byte, or the end of idling
    bool started = false;        // a byte of its next request has come
    int64_t served = 0;          // requests run on it so far
    // The head, read as it comes (each byte looked at once, however slowly it trickles):
    size_t scanned = 0;  // bytes of the buffer looked at
    int64_t lines = 0;   // line ends among them
    size_t need = 0;     // once the head is whole: the bytes the request needs (head + body)
    bool close_after = false;  // its body is refused unread: close once answered
  };
  bool process_and_close_socket(socket_t sock) override;  // the accept thread hands over here
  void poll_loop();
  void pool_loop();
  // Reads what the socket has; false when the connection is to be closed.
  bool gather(Connection& c);
  // A complete request (head and declared body) is buffered, or it need not be.
  enum class Head { incomplete, ready, too_large };
  Head check(Connection& c) const;
  void run(Connection c);  // on a pool thread
  void refuse(Connection& c, int status, const std::string& message);
  void close_connection(Connection& c);
  void wake();

  const GateOptions options_;
  const std::function<std::string(int, const std::string&)> error_body_;
  std::mutex mutex_;
  std::condition_variable ready_cv_;
  std::deque<Connection> incoming_;  // handed over, not yet polled
  std::deque<Connection> ready_;     // complete requests for the pool
  bool stopping_ = false;
  GateStats stats_;
  int wake_fd_ = -1;  // an eventfd: new connections, stop
  std::thread poller_;
  std::vector<std::thread> pool_;
};

}  // namespace folio::serve
