#pragma once

// Child processes for integration tests: spawned with posix_spawn, stdout and stderr
// captured to files, every wait bounded. A child_process that is still running when
// it goes out of scope (e.g. a failed REQUIRE) is killed and reaped.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace prfaas::test {

struct command {
  std::vector<std::string> argv;      ///< argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> extra_env; ///< "NAME=value", added to (or replacing in) ours
  std::filesystem::path log_stem;     ///< output goes to <stem>.stdout and <stem>.stderr
};

/// How a child ended: its exit code, or 128 + signal number when a signal ended it.
using exit_code = int;

class child_process {
public:
  /// Starts `cmd`. Throws std::runtime_error when it cannot be spawned.
  explicit child_process(const command& cmd);
  ~child_process();

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// True until the child has been reaped.
  bool running();
  /// Waits up to `limit` for the child to end; nullopt if it is still running.
  std::optional<exit_code> wait_for(std::chrono::milliseconds limit);
  /// Sends `sig` if the child is still running.
  void signal(int sig);

  std::string out() const;
  std::string err() const;
  /// Both streams, for failure messages.
  std::string output() const;
  std::string describe() const;

private:
  pid_t pid_ = -1;
  std::optional<exit_code> status_;
  std::filesystem::path stdout_;
  std::filesystem::path stderr_;
  std::string what_; ///< the command line, for messages
};

/// Runs `cmd` to completion; nullopt when it outlived `limit` (it is then killed).
struct run_result {
  std::optional<exit_code> code;
  std::string output;
};
run_result run(const command& cmd, std::chrono::milliseconds limit);

/// A directory created under the system's temp folder and removed with everything in it.
class temp_dir {
public:
  explicit temp_dir(const std::string& prefix);
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

/// `n` distinct TCP ports on 127.0.0.1 that were free a moment ago (each bound to
/// port 0 and held until all are found, then closed).
std::vector<uint16_t> free_loopback_ports(size_t n);

std::string read_file(const std::filesystem::path& p);
void write_file(const std::filesystem::path& p, const std::string& text);

} // namespace prfaas::test
