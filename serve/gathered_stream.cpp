#include "serve/gathered_stream.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace folio::serve {
namespace {

std::string address(const sockaddr_storage& a, int& port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    port = ntohs(v6.sin6_port);
  }
  return text;
}

// Waits up to `ms` for the socket to be readable (POLLIN) or writable (POLLOUT).
bool wait_for(int fd, short events, int ms) {
  pollfd p{fd, events, 0};
  int n;
  do n = ::poll(&p, 1, ms);
  while (n < 0 && errno == EINTR);
  return n > 0 && (p.revents & (events | POLLHUP | POLLERR));
}

}  // namespace

bool GatheredStream::is_readable() const {
  return taken_ < buffer_.size() || (read_socket_ && wait_for(fd_, POLLIN, io_ms_));
}

bool GatheredStream::is_writable() const {
  if (!wait_for(fd_, POLLOUT, io_ms_)) return false;
  char byte;  // a peer that has closed reads as end of file
  return !(wait_for(fd_, POLLIN, 0) && ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0);
}

ssize_t GatheredStream::read(char* ptr, size_t size) {
  if (taken_ < buffer_.size()) {
    const size_t n = std::min(size, buffer_.size() - taken_);
    std::memcpy(ptr, buffer_.data() + taken_, n);
    taken_ += n;
    return ssize_t(n);
  }
  if (!read_socket_ || !wait_for(fd_, POLLIN, io_ms_)) return -1;
  ssize_t n;
  do n = ::recv(fd_, ptr, size, 0);
  while (n < 0 && errno == EINTR);
  return n;
}

ssize_t GatheredStream::write(const char* ptr, size_t size) {
  if (!wait_for(fd_, POLLOUT, io_ms_)) return -1;
  ssize_t n;
  do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n;
}

void GatheredStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  ip = ::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0 ? address(a, port) : "";
}

void GatheredStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  ip = ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0 ? address(a, port) : "";
}

}  // namespace folio::serve
