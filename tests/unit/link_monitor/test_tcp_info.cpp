// TCP_INFO on a real loopback TCP connection: an established socket reports its
// state, an RTT and the bytes the peer acknowledged; non-TCP fds report nothing.

#include <cstring>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "link_monitor/tcp_info.hpp"

using prfaas::link::read_tcp_info;

namespace {

struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

TEST_CASE("tcp info of an established loopback connection") {
  fd_guard server{::socket(AF_INET, SOCK_STREAM, 0)};
  REQUIRE(server.fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  REQUIRE(::bind(server.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(server.fd, 1) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(server.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);

  fd_guard client{::socket(AF_INET, SOCK_STREAM, 0)};
  REQUIRE(::connect(client.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  fd_guard accepted{::accept(server.fd, nullptr, nullptr)};
  REQUIRE(accepted.fd >= 0);

  // A round trip: once the client reads the answer, the answer's segment has
  // acknowledged all the client sent.
  std::string out(10000, 'x');
  size_t sent = 0;
  while (sent < out.size()) {
    auto n = ::send(client.fd, out.data() + sent, out.size() - sent, 0);
    REQUIRE(n > 0);
    sent += static_cast<size_t>(n);
  }
  std::string in(out.size(), '\0');
  size_t got = 0;
  while (got < in.size()) {
    auto n = ::recv(accepted.fd, in.data() + got, in.size() - got, 0);
    REQUIRE(n > 0);
    got += static_cast<size_t>(n);
  }
  REQUIRE(::send(accepted.fd, "k", 1, 0) == 1);
  char k = 0;
  REQUIRE(::recv(client.fd, &k, 1, 0) == 1);

  auto s = read_tcp_info(client.fd);
  REQUIRE(s);
  CHECK(s->state == 1); // TCP_ESTABLISHED
  CHECK(s->rtt.count() > 0);
  CHECK(s->snd_mss > 0);
  CHECK(s->snd_cwnd > 0);
  CHECK(s->total_retransmits == 0); // loopback loses nothing
  CHECK(s->unacked == 0);
  if (s->bytes_acked) // kernels >= 4.1
    CHECK(*s->bytes_acked >= out.size());
  CHECK(read_tcp_info(server.fd)); // a listening TCP socket has TCP_INFO too
}

TEST_CASE("tcp info of something that is not a tcp socket is nothing") {
  fd_guard udp{::socket(AF_INET, SOCK_DGRAM, 0)};
  REQUIRE(udp.fd >= 0);
  CHECK_FALSE(read_tcp_info(udp.fd));
  int p[2];
  REQUIRE(::pipe(p) == 0);
  fd_guard r{p[0]}, w{p[1]};
  CHECK_FALSE(read_tcp_info(r.fd));
  CHECK_FALSE(read_tcp_info(-1));
}
