#pragma once

// What the netns test programs share (plain programs, not Catch2: they exit 77 where
// the kernel refuses namespaces): a pass/fail line per check, a command that must
// succeed, and entering a named namespace.

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "support/process.hpp"

namespace prfaas::test::netns {

/// Counts failed checks; main returns failures == 0 ? 0 : 1.
inline int failures = 0;

inline void check(bool ok, const std::string& what) {
  std::cout << (ok ? "ok   " : "FAIL ") << what << std::endl;
  failures += ok ? 0 : 1;
}

/// Runs `argv` (10 s at most); prints its output when it fails.
inline bool sh(const std::vector<std::string>& argv) {
  auto r = run({.argv = argv}, std::chrono::seconds(10));
  if (r.code != 0)
    std::cout << "command failed: " << r.output << std::endl;
  return r.code == 0;
}

/// Moves the calling thread (and the threads it starts later) into namespace `ns`.
inline bool enter_netns(const std::string& ns) {
  int fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

} // namespace prfaas::test::netns
