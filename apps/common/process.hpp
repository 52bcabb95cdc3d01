#pragma once

// Child processes and loopback helpers for the tools that start real nodes
// (prfaas-chaos) and for the integration tests: real processes, real sockets, every wait
// bounded. A child_process still running when it goes out of scope
// (e.g. after a failed REQUIRE) is killed and reaped.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace prfaas::proc {

/// `n` distinct TCP ports on 127.0.0.1 that were free a moment ago (each bound and
/// held until all are found, then released), picked at random below the kernel's
/// ephemeral range so that nothing but another explicit pick can take them before
/// the caller binds them.
std::vector<uint16_t> free_ports(size_t n);

/// A fresh directory under the system's temp folder, removed with its contents.
class temp_dir {
public:
  explicit temp_dir(const std::string& prefix = "prfaas-test");
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// Writes `content` to `<path()>/<name>` and returns that path.
  std::filesystem::path file(const std::string& name, const std::string& content) const;

private:
  std::filesystem::path path_;
};

/// What to start and where its output goes.
struct command {
  std::vector<std::string> argv;      ///< argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> extra_env; ///< "NAME=value", added to (or replacing in) ours
  std::filesystem::path out_file;     ///< stdout, appended; inherited from us when empty
  std::filesystem::path err_file;     ///< stderr, appended; `out_file` when empty
};

/// A child process (posix_spawn, stdin from /dev/null, no blocked signals); killed
/// with SIGKILL and reaped on destruction if still running.
class child_process {
public:
  /// Starts `cmd`. Throws std::runtime_error when it cannot be spawned.
  explicit child_process(command cmd);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// True until the child has been reaped.
  bool running();
  /// Waits up to `limit`; the exit code (128 + signal number when a signal ended the
  /// child), or nullopt if it is still running.
  std::optional<int> wait(std::chrono::milliseconds limit);
  /// Sends `sig` if the child is still running.
  void signal(int sig);

  /// What the child wrote to stdout (to its only log when the streams share one).
  std::string out() const;
  /// What the child wrote to stderr (to its only log when the streams share one).
  std::string err() const;
  /// The command line and everything it wrote, for failure messages.
  std::string output() const;

private:
  command cmd_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

/// How a run() ended: the exit code (nullopt when killed for outliving its limit) and
/// the child's output().
struct run_result {
  std::optional<int> code;
  std::string output;
};

/// Runs `cmd` to completion, killing it if it is still running after `limit`.
run_result run(command cmd, std::chrono::milliseconds limit);

/// The whole file; empty when it cannot be read.
std::string read_file(const std::filesystem::path& p);
/// A deployment file's text with every 127.0.0.1 port replaced by a free one;
/// `ports` receives old → new.
std::string with_free_ports(const std::string& text, std::map<int, int>& ports);

/// The `NAME=value` lines of a file (e.g. what tools/netns-two-dc.sh --hold writes).
std::map<std::string, std::string> read_assignments(const std::filesystem::path& p);

/// Polls `pred` every `step` until it holds or `timeout` passes; the last answer.
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

} // namespace prfaas::proc
