#pragma once

// Stop sequences over a token stream, OpenAI-style: output ends when a stop
// sequence appears, and the stop sequence itself is never sent. Tokens that might
// be the start of a stop sequence are held back until it is clear they are not.
// Plain C++; the decode worker feeds it each sampled token.

#include <cstddef>
#include <vector>

#include "prfaas/engine/types.hpp"

namespace prfaas::serving {

class stop_matcher {
public:
  using token = engine::token;

  explicit stop_matcher(std::vector<std::vector<token>> stops = {});

  /// Feeds one token. Returns the tokens that are now safe to send (possibly none);
  /// sets `stopped` when a stop sequence just completed (then nothing more is sent).
  std::vector<token> feed(token t, bool& stopped);
  /// The output ended for another reason (length, EOS): everything held back goes out.
  std::vector<token> flush();
  /// Tokens currently held back.
  size_t held() const { return held_.size(); }

private:
  std::vector<std::vector<token>> stops_;
  std::vector<token> held_;
};

} // namespace prfaas::serving
