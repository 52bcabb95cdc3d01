#pragma once

// `prfaas-node actor-types`: every actor type this binary knows (built in, plus the
// plugins given with --plugin), with each parameter's default and doc, as the comment
// block configs/sample.yaml carries; `--update FILE` rewrites that block in FILE.

#include <string>
#include <vector>

namespace prfaas::app {

struct actor_types_options {
  std::vector<std::string> plugins; ///< shared libraries adding types
  std::string update;               ///< a file whose generated block is rewritten
};

/// Prints the block (or rewrites `update`'s); the exit code: 0, or 2 when a plugin
/// does not load or the file has no block (the message on stderr).
int run_actor_types(const actor_types_options& o);

} // namespace prfaas::app
