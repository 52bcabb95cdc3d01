#pragma once

// Child processes and loopback helpers for integration tests: real processes, real
// sockets, every wait bounded, every child reaped (killed if the test fails).

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace prfaas::test {

/// A free TCP port on 127.0.0.1 (bound to port 0, read back, released).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    throw std::runtime_error("free_port: bind failed");
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// A unique temporary directory, removed on destruction.
class temp_dir {
public:
  temp_dir() {
    std::string tmpl = "/tmp/prfaas-test-XXXXXX";
    if (!::mkdtemp(tmpl.data()))
      throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~temp_dir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name, const std::string& content) const {
    auto p = path_ + "/" + name;
    std::ofstream{p} << content;
    return p;
  }

private:
  std::string path_;
};

/// A child process; killed (SIGKILL) and reaped on destruction if still running.
class child_process {
public:
  child_process(std::vector<std::string> argv, std::string log_file = {}) {
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (!log_file.empty()) {
      posix_spawn_file_actions_addopen(&fa, 1, log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      posix_spawn_file_actions_addopen(&fa, 2, log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    }
    // The child must not inherit a blocked signal mask from the test's threads.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    int rc = posix_spawn(&pid_, args[0], &fa, &attr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
      throw std::runtime_error("posix_spawn " + argv[0] + " failed: " + std::to_string(rc));
  }
  ~child_process() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      wait(std::chrono::seconds(10));
    }
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) { ::kill(pid_, sig); }

  /// Waits up to `timeout`; returns the exit code (128 + signal if killed), or
  /// nothing if the child is still running.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    if (status_)
      return status_;
    auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int st = 0;
      auto r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status_;
      }
      if (std::chrono::steady_clock::now() >= until)
        return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in{path};
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Polls `pred` every `step` until it holds or `timeout` passes.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds step = std::chrono::milliseconds(10)) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred())
      return true;
    std::this_thread::sleep_for(step);
  }
  return pred();
}

} // namespace prfaas::test
