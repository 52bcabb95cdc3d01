#pragma once

// `prfaas-node keygen`: makes a node's CURVE key pair for the deployment's
// `security:` section.

#include <string>

namespace prfaas::app {

struct keygen_options {
  std::string out;  ///< key file to write (created 0600, never overwritten); empty = stdout only
  std::string node; ///< node name, for the comment and the printed config snippet
};

/// Prints the public key and the `security.nodes` entry to paste; writes the key file
/// when asked. Returns the process exit code.
int run_keygen(const keygen_options& o);

} // namespace prfaas::app
