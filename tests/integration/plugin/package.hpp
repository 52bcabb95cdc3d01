#pragma once

// The prfaas package as an out-of-tree user gets it: the main build installed with
// `cmake --install` into a temporary prefix, and examples/custom_actor configured and
// built against that prefix with find_package(prfaas). Each step runs once per test
// process; the prefix is removed when the process exits.

#include <filesystem>
#include <string>
#include <vector>

#include "support/process.hpp"

namespace prfaas::test {

struct installed_package {
  std::filesystem::path prefix;
  std::filesystem::path node_binary; ///< <prefix>/bin/prfaas-node
  std::filesystem::path library_dir; ///< where libprfaas_runtime.so was installed
};

/// Installs the main build (PRFAAS_BUILD_DIR) into a temporary prefix. Fails the
/// running test with the installer's output when that does not work.
const installed_package& installed();

/// examples/custom_actor built against installed(); the path of its plugin library.
const std::filesystem::path& example_plugin();

/// `prfaas-node <args...>` from the installed package; stdout and stderr go to
/// `<log_stem>.stdout` and `<log_stem>.stderr`.
command installed_node(std::vector<std::string> args, std::filesystem::path log_stem);

} // namespace prfaas::test
