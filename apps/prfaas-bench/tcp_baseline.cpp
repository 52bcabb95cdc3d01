#include "tcp_baseline.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "stats.hpp"

namespace prfaas::bench {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("plain TCP baseline: " + what + ": " + std::strerror(errno));
}

sockaddr_in address_of(const std::string& host, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1)
    throw std::invalid_argument("plain TCP baseline: not an IPv4 address: '" + host + "'");
  return a;
}

bool read_all(int fd, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    auto r = ::recv(fd, p, n, 0);
    if (r <= 0) {
      if (r < 0 && errno == EINTR)
        continue;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const void* buf, size_t n) {
  auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    auto r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

} // namespace

proc_usage self_usage() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return {secs(ru.ru_utime) + secs(ru.ru_stime), static_cast<uint64_t>(ru.ru_minflt)};
}

uint64_t peak_rss_bytes() {
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stoull(line.substr(6)) * 1024; // "VmHWM:   123456 kB"
  return 0;
}

bool reset_peak_rss() {
  std::ofstream out{"/proc/self/clear_refs"};
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

tcp_sink::tcp_sink(const std::string& host, int port, size_t buffer_bytes, size_t ring)
    : buffer_bytes_(buffer_bytes),
      ring_(std::max<size_t>(1, ring), std::vector<std::byte>(buffer_bytes, std::byte{1})) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0)
    fail("socket");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  auto a = address_of(host, port);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    fail("bind " + host + ":" + std::to_string(port));
  if (::listen(listen_fd_, 64) != 0)
    fail("listen");
  acceptor_ = std::thread{[this] { accept_loop(); }};
}

void tcp_sink::accept_loop() {
  while (!stop_) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR)
        continue;
      return; // closed by the destructor
    }
    fds_.push_back(fd);
    readers_.emplace_back([this, fd] { read_loop(fd); });
  }
}

/// One connection's transfers.
void tcp_sink::read_loop(int fd) {
  std::vector<std::byte> own(buffer_bytes_, std::byte{1}); // touched: warm from the start
  for (;;) {
    uint64_t head[2] = {0, 0}; // length, mode
    if (!read_all(fd, head, sizeof head) || head[0] == 0)
      return;
    for (uint64_t len = head[0]; len > 0;) {
      auto& buf = head[1] == 1 ? ring_[next_++ % ring_.size()] : own;
      auto n = std::min<uint64_t>(len, buf.size());
      if (!read_all(fd, buf.data(), n))
        return;
      len -= n;
    }
    char ok = 'k';
    if (!write_all(fd, &ok, 1))
      return;
  }
}

tcp_sink::~tcp_sink() {
  stop_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  ::close(listen_fd_);
  acceptor_.join();
  for (int fd : fds_)
    ::shutdown(fd, SHUT_RDWR);
  for (auto& t : readers_)
    t.join();
  for (int fd : fds_)
    ::close(fd);
}

tcp_source::tcp_source(const std::string& host, int port, uint32_t connections,
                       const std::vector<std::byte>& pattern, size_t ring)
    : ring_(std::max<size_t>(1, ring), pattern) {
  auto a = address_of(host, port);
  for (uint32_t i = 0; i < connections; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      fail("socket");
    fds_.push_back(fd);
    // The sink may still be starting (another process): a few tries.
    int tries = 0;
    while (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      if (++tries > 100)
        fail("connect " + host + ":" + std::to_string(port));
      ::usleep(20000);
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
}

tcp_source::~tcp_source() {
  for (int fd : fds_) {
    uint64_t end[2] = {0, 0};
    (void)write_all(fd, end, sizeof end);
    ::close(fd);
  }
}

double tcp_source::send(uint64_t bytes, bool distinct) {
  const uint64_t share = bytes / fds_.size();
  std::atomic<size_t> next{0};
  std::vector<std::thread> writers;
  std::atomic<bool> ok{true};
  auto t0 = clock_type::now();
  for (size_t i = 0; i < fds_.size(); ++i) {
    uint64_t mine = i + 1 == fds_.size() ? bytes - share * (fds_.size() - 1) : share;
    writers.emplace_back([&, fd = fds_[i], mine] {
      const uint64_t head[2] = {mine, distinct ? 1u : 0u};
      bool good = write_all(fd, head, sizeof head);
      for (uint64_t left = mine; good && left > 0;) {
        const auto& buf = distinct ? ring_[next++ % ring_.size()] : ring_.front();
        auto n = std::min<uint64_t>(left, buf.size());
        good = write_all(fd, buf.data(), n);
        left -= n;
      }
      char ack = 0;
      if (!good || !read_all(fd, &ack, 1))
        ok = false;
    });
  }
  for (auto& w : writers)
    w.join();
  double s = seconds_since(t0);
  if (!ok)
    throw std::runtime_error("plain TCP baseline: a connection failed mid-transfer");
  return s;
}

std::optional<double> iperf3_loopback_gbps(uint32_t streams, int seconds, std::string& why) {
  if (std::system("command -v iperf3 >/dev/null 2>&1") != 0) {
    why = "iperf3 is not installed (tools/bootstrap.sh installs it)";
    return std::nullopt;
  }
  const int port = 20000 + static_cast<int>(::getpid() % 20000);
  pid_t server = ::fork();
  if (server == 0) {
    ::execlp("iperf3", "iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", std::to_string(port).c_str(),
             "--logfile", "/dev/null", static_cast<char*>(nullptr));
    _exit(127);
  }
  ::usleep(300000); // let it listen
  std::string cmd = "iperf3 -J -c 127.0.0.1 -p " + std::to_string(port) + " -P " +
                    std::to_string(streams) + " -t " + std::to_string(seconds) + " 2>/dev/null";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
      out.append(buf, n);
    ::pclose(p);
  }
  ::kill(server, SIGTERM);
  ::waitpid(server, nullptr, 0);
  try {
    auto j = nlohmann::json::parse(out);
    return j.at("end").at("sum_received").at("bits_per_second").get<double>() / 1e9;
  } catch (const std::exception& e) {
    why = std::string{"iperf3 output did not parse: "} + e.what();
    return std::nullopt;
  }
}

} // namespace prfaas::bench
