#pragma once

// A request's output as the client sees it: tokens in, text out. Plain C++, no actors
// (tests/unit/gateway/test_output_text.cpp).
//
// The gateway feeds it every token its decode worker sends (in index order, across
// resumes) and streams what comes back. It detokenizes with the model's tokenizer and:
//  * never splits a UTF-8 character: bytes of an incomplete one wait for the rest;
//  * matches the stop strings on the text, OpenAI-style: the output ends where the
//    first one begins, and no part of it is ever sent — text that could be the start
//    of a stop string is held back until it is clear it is not. (This is where stop
//    strings are matched for every engine; the decode worker knows nothing of them,
//    and is cancelled when one matched.)
//  * attaches each token (its id, and its log-probabilities when the request asked for
//    them) to the text that token begins.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prfaas/engine/tokenizer.hpp"

namespace prfaas::serving {

using engine::token;

/// One output token's log-probabilities, with the tokens' texts.
struct logprob_entry {
  std::string token; ///< its bytes (may be part of a UTF-8 character)
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top; ///< most likely first
  size_t text_offset = 0; ///< where its text begins in the output text (bytes)
};

/// What a stream has to add since the last delta.
struct output_delta {
  std::string text;                    ///< valid UTF-8
  std::vector<token> tokens;           ///< the tokens this text comes from
  std::vector<logprob_entry> logprobs; ///< one per token, when the request asked
  bool empty() const { return text.empty() && tokens.empty(); }
  void append(output_delta&& more);
};

class output_text {
public:
  output_text(std::shared_ptr<const engine::tokenizer> tok, std::vector<std::string> stops,
              bool logprobs);

  /// Feeds the next output token (`lp`: its log-probabilities, or null). Nothing
  /// happens once a stop string matched.
  output_delta feed(token t, const engine::sampled_logprobs* lp);
  /// The output ended without a stop string (length, end of output): what is held goes
  /// out (an incomplete character at the very end as U+FFFD).
  output_delta finish();

  /// A stop string matched: the output is complete.
  bool stopped() const { return stopped_; }
  /// Tokens fed up to the end of the output (the stop string's last token included).
  uint32_t tokens() const { return fed_; }

private:
  struct pending {
    token id;
    size_t begin, end; ///< its bytes in the whole output byte stream
    std::optional<engine::sampled_logprobs> lp;
  };
  /// Releases the output bytes up to `upto` (absolute): text and the tokens it begins.
  output_delta release(size_t upto, bool all_tokens);
  logprob_entry entry_of(const engine::sampled_logprobs& lp) const;

  std::shared_ptr<const engine::tokenizer> tok_;
  std::vector<std::string> stops_;
  bool logprobs_;
  std::string held_;    ///< bytes from released_ on
  size_t released_ = 0; ///< bytes of the stream sent (absolute)
  size_t total_ = 0;    ///< bytes of the stream fed (absolute)
  size_t text_len_ = 0; ///< bytes of text sent (after U+FFFD replacement)
  std::vector<pending> queue_;
  uint32_t fed_ = 0;
  bool stopped_ = false;
};

} // namespace prfaas::serving
