#include "serve/connection_gate.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <system_error>

#include "base/error.h"
#include "serve/gathered_stream.h"

namespace folio::serve {
namespace {

using std::chrono::duration;

int millis(double seconds) { return int(std::max(0.0, seconds) * 1000); }

// httplib's accept thread hands each connection to its task queue; the gate takes it
// there at once, so this queue runs the hand-over inline.
struct InlineQueue : httplib::TaskQueue {
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower(x) == std::tolower(y); });
}

// What the poller waits for after the head: the declared body, or nothing when a pool
// thread is to read it (chunked, after "Expect: 100-continue") or httplib refuses it
// unread (over max_body: 413; a malformed length: 400), and then the connection must
// close: what follows on it is the refused body, not a request.
struct Body {
  size_t wait = 0;
  bool refused = false;
};
Body body_to_wait_for(std::string_view head, size_t max_body) {
  size_t length = 0;
  for (size_t at = head.find("\r\n"); at != std::string_view::npos && at < head.size();) {
    at += 2;
    const size_t eol = std::min(head.find("\r\n", at), head.size());
    const std::string_view line = head.substr(at, eol - at);
    at = eol;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (equals_ignoring_case(name, "Expect") || equals_ignoring_case(name, "Transfer-Encoding")) return {};
    if (equals_ignoring_case(name, "Content-Length")) {
      if (value.empty()) return {0, true};
      length = 0;
      for (char d : value) {
        if (d < '0' || d > '9' || length > max_body) return {0, true};
        length = length * 10 + size_t(d - '0');
      }
      if (length > max_body) return {0, true};
    }
  }
  return {length, false};
}

}  // namespace

GatedServer::GatedServer(GateOptions options, std::function<std::string(int, const std::string&)> error_body)
    : options_(options), error_body_(std::move(error_body)) {
  new_task_queue = [] { return new InlineQueue; };
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  try {
    poller_ = std::thread([this] { poll_loop(); });
    for (int i = 0; i < std::max(1, options_.threads); ++i) pool_.emplace_back([this] { pool_loop(); });
  } catch (const std::system_error& e) {  // the threads the system allows, fewer than asked
    stop_gate();  // joins those started: a joinable thread destroyed would abort
    ::close(wake_fd_);
    fail("serve", "cannot start ", std::max(1, options_.threads), " threads to run requests (one for each slot "
         "and each place in the queue, and 32 more): ", e.what(), "; fewer --slots or a shorter --queue");
  }
}

GatedServer::~GatedServer() {
  stop_gate();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void GatedServer::widen_backlog(int backlog) { ::listen(svr_sock_, backlog); }

void GatedServer::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

bool GatedServer::process_and_close_socket(socket_t sock) {
  Connection c;
  c.fd = sock;
  c.since = Clock::now();
  c.deadline = c.since + std::chrono::milliseconds(millis(options_.request_timeout));
  c.started = true;  // a new connection is here to send a request: it gets request_timeout
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      ::close(sock);
      return false;
    }
    incoming_.push_back(std::move(c));
  }
  wake();
  return true;
}

void GatedServer::stop_gate() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake();
  ready_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  for (std::thread& t : pool_) t.join();
  for (Connection& c : incoming_) close_connection(c);
  for (Connection& c : ready_) close_connection(c);
  incoming_.clear();
  ready_.clear();
}

GateStats GatedServer::gate_stats() {
  std::lock_guard lock(mutex_);
  return stats_;
}

void GatedServer::close_connection(Connection& c) {
  if (c.fd < 0) return;
  ::shutdown(c.fd, SHUT_RDWR);
  ::close(c.fd);
  c.fd = -1;
}

void GatedServer::refuse(Connection& c, int status, const std::string& message) {
  const std::string body = error_body_(status, message);
  const std::string reason = status == 431 ? "Request Header Fields Too Large" : "Request Timeout";
  const std::string response = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                               "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\n\r\n" + body;
  // Best effort, without waiting: a client that does not read it is not waited for.
  [[maybe_unused]] const ssize_t n = ::send(c.fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  close_connection(c);
}

bool GatedServer::gather(Connection& c) {
  char chunk[16384];
  for (;;) {
    const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n > 0) {
      if (!c.started) {  // the first byte of a request on a kept-alive connection
        c.started = true;
        c.deadline = Clock::now() + std::chrono::milliseconds(millis(options_.request_timeout));
      }
      c.buffer.append(chunk, size_t(n));
      // Never hold more than one request's worth (a head, until it is whole): the check
      // refuses what exceeds it.
      if (c.buffer.size() > options_.max_head_bytes + (c.need ? options_.max_body : 0)) return true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);  // 0: the client closed
  }
}

GatedServer::Head GatedServer::check(Connection& c) const {
  const std::string_view b = c.buffer;
  if (c.need == 0) {
    const size_t end = b.find("\r\n\r\n", c.scanned >= 3 ? c.scanned - 3 : 0);
    const size_t upto = end == std::string_view::npos ? b.size() : end + 4;
    c.lines += std::count(b.begin() + ptrdiff_t(c.scanned), b.begin() + ptrdiff_t(upto), '\n');
    c.scanned = upto;
    // Header lines: all but the request line and the blank line that ends them.
    if (upto > options_.max_head_bytes || c.lines - 2 > options_.max_headers) return Head::too_large;
    if (end == std::string_view::npos) return Head::incomplete;
    const Body body = body_to_wait_for(b.substr(0, end), options_.max_body);
    c.need = upto + body.wait;
    c.close_after = body.refused;
  }
  return b.size() >= c.need ? Head::ready : Head::incomplete;
}

void GatedServer::poll_loop() {
  std::list<Connection> waiting;  // in the order they began to wait
  std::vector<pollfd> fds;
  std::vector<std::list<Connection>::iterator> at;
  auto publish = [&] {
    std::lock_guard lock(mutex_);
    stats_.waiting = int64_t(waiting.size());
  };
  for (;;) {
    bool recheck = false;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) break;
      for (Connection& c : incoming_) {
        recheck |= !c.buffer.empty();  // it may hold a whole request already: do not wait to look
        waiting.push_back(std::move(c));
      }
      incoming_.clear();
    }
    // A flood of connections: the longest-waiting go first.
    int64_t evicted = 0;
    while (int64_t(waiting.size()) > options_.max_waiting) {
      close_connection(waiting.front());
      waiting.pop_front();
      ++evicted;
    }
    if (evicted) {
      std::lock_guard lock(mutex_);
      stats_.evicted += evicted;
    }
    publish();
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    at.clear();
    Clock::time_point next = Clock::now() + std::chrono::seconds(1);
    for (auto it = waiting.begin(); it != waiting.end(); ++it) {
      fds.push_back({it->fd, POLLIN, 0});
      at.push_back(it);
      next = std::min(next, it->deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
    const int timeout_ms = recheck ? 0 : int(std::clamp<int64_t>(wait + 1, 0, 1000));
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
      // EINTR, or no memory for the moment: look again shortly rather than stop serving.
      std::this_thread::sleep_for(std::chrono::milliseconds(errno == EINTR ? 0 : 10));
      continue;
    }
    if (fds[0].revents & POLLIN) {
      uint64_t count;
      [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof count);
    }
    const Clock::time_point now = Clock::now();
    int64_t too_large = 0, timed_out = 0;
    std::vector<Connection> complete;
    for (size_t i = 1; i < fds.size(); ++i) {
      auto it = at[i - 1];
      Connection& c = *it;
      bool open = true;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) open = gather(c);
      const Head h = open ? check(c) : Head::incomplete;
      if (!open) {
        close_connection(c);
      } else if (h == Head::too_large) {
        refuse(c, 431, "the request's headers exceed this server's limit of " +
                           std::to_string(options_.max_headers) + " headers, " +
                           std::to_string(options_.max_head_bytes) + " bytes");
        ++too_large;
      } else if (h == Head::ready) {
        complete.push_back(std::move(c));
      } else if (now >= c.deadline) {
        if (c.buffer.empty()) close_connection(c);  // nothing was asked: nothing to answer
        else {
          refuse(c, 408, "the request did not arrive whole within " + std::to_string(millis(options_.request_timeout)) +
                             " ms");
          ++timed_out;
        }
      } else {
        continue;
      }
      waiting.erase(it);
    }
    {
      std::lock_guard lock(mutex_);
      stats_.too_large += too_large;
      stats_.timed_out += timed_out;
      stats_.waiting = int64_t(waiting.size());  // a request handed on waits no more (its /health must not count it)
      for (Connection& c : complete) ready_.push_back(std::move(c));
    }
    if (!complete.empty()) ready_cv_.notify_all();
  }
  for (Connection& c : waiting) close_connection(c);
  publish();
}

void GatedServer::pool_loop() {
  for (;;) {
    Connection c;
    {
      std::unique_lock lock(mutex_);
      ready_cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
      if (ready_.empty()) return;  // stopping, nothing left to run
      c = std::move(ready_.front());
      ready_.pop_front();
    }
    run(std::move(c));
  }
}

void GatedServer::run(Connection c) {
  bool closed = false, ok;
  const bool last = c.served + 1 >= options_.max_requests_per_connection;
  {
    GatheredStream stream(c.fd, c.buffer, millis(options_.io_timeout), !c.close_after);
    ok = process_request(stream, last, closed, nullptr);
  }
  ++c.served;
  bool stopping;
  {
    std::lock_guard lock(mutex_);
    stopping = stopping_;
  }
  if (!ok || closed || last || c.close_after || stopping) return close_connection(c);
  // Back to the poller until its next request has come whole.
  c.since = Clock::now();
  c.started = !c.buffer.empty();  // a pipelined request came with this one
  c.scanned = 0, c.lines = 0, c.need = 0;
  c.deadline = c.since + std::chrono::milliseconds(millis(c.started ? options_.request_timeout
                                                                     : options_.keep_alive_timeout));
  {
    std::lock_guard lock(mutex_);
    incoming_.push_back(std::move(c));
  }
  wake();
}

}  // namespace folio::serve
