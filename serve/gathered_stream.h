#pragma once
// httplib's Stream over a connection whose request the connection gate's poller has
// buffered (serve/connection_gate.h): reads take the buffer first, then the socket
// (for bodies the poller did not wait for), unless the body is refused: httplib would
// read a refused body to its end to discard it, which a client declaring 100 MB could
// make last, on a thread, as long as it liked.
#include <httplib.h>

#include <string>

namespace folio::serve {

class GatheredStream : public httplib::Stream {
 public:
  GatheredStream(int fd, std::string& buffer, int io_ms, bool read_socket)
      : fd_(fd), buffer_(buffer), io_ms_(io_ms), read_socket_(read_socket) {}
  // What the request did not read (a pipelined next request) stays for the poller.
  ~GatheredStream() override { buffer_.erase(0, taken_); }

  bool is_readable() const override;
  // False too once the peer has closed: stop writing to it now, not a write later.
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  int fd_;
  std::string& buffer_;  // the poller's bytes of this connection
  size_t taken_ = 0;     // of buffer_, read by the request
  int io_ms_;
  bool read_socket_;
};

}  // namespace folio::serve
