#pragma once

// The text side of a model, for the gateway: prompts to tokens, a conversation to its
// prompt (the model's chat template), and output tokens back to text. Two
// implementations: the byte tokenizer of the reference and profile engines, and the
// one of a GGUF's vocabulary (make_tokenizer in tokenizer_factory.hpp). The gateway
// knows only this interface.

#include "prfaas/engine/result.hpp"
#include "prfaas/engine/types.hpp"

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace prfaas::engine {

/// One message of a chat conversation (text content only).
struct chat_message {
  std::string role; ///< system, developer, user, assistant, tool
  std::string content;
};

class tokenizer {
public:
  virtual ~tokenizer() = default;

  /// Vocabulary size: every token id is in [0, vocab_size()).
  virtual uint32_t vocab_size() const = 0;
  /// Whether generating `t` ends the output (EOS, end of turn, ...).
  virtual bool is_end(token t) const = 0;

  /// Tokens of prompt text. `add_special`: the markers the model puts around a raw
  /// prompt (e.g. BOS). `parse_special`: text such as "<|im_start|>" becomes its
  /// special token (chat prompts rendered by the template need it); otherwise it is
  /// plain text.
  virtual result<std::vector<token>> tokenize(std::string_view text, bool add_special,
                                              bool parse_special) const = 0;

  /// The bytes token `t` stands for. May be part of a UTF-8 character (byte-level
  /// BPE); concatenating the pieces of a token sequence gives its text. Ends of
  /// output render as nothing.
  virtual std::string piece(token t) const = 0;

  /// The prompt a conversation becomes under the model's chat template, ready for an
  /// assistant reply; an error names what the template refused (e.g. a role).
  virtual result<std::string> chat_prompt(std::span<const chat_message> messages) const = 0;
  /// Whether chat prompts carry special tokens to parse (see tokenize).
  virtual bool chat_has_special() const = 0;
};

/// Turns a token stream into text as it arrives, never splitting a UTF-8 character:
/// the bytes of an incomplete character are held until it completes. Bytes that can
/// never form a valid character come out as U+FFFD.
class detokenizer {
public:
  explicit detokenizer(const tokenizer& t) : t_(&t) {}

  /// Text that `tk` completes (possibly empty).
  std::string feed(token tk);
  /// Text of what is still held (an incomplete character at the end: U+FFFD).
  std::string flush();
  /// Bytes held back, waiting for the rest of a character.
  size_t held() const { return held_.size(); }

private:
  const tokenizer* t_;
  std::string held_;
};

/// The reference and profile engines' byte-level vocabulary: one UTF-8 byte of the
/// prompt is one token (0..255), 256 is EOS. Output tokens 0..255 are bytes (so the
/// text of any output is the bytes it spelled, invalid sequences shown as U+FFFD);
/// the profile engine's synthetic tokens (>= 256, other than EOS) render as one letter
/// each. Chat prompts use a fixed template:
///   "<|system|>\n...\n<|user|>\n...\n<|assistant|>\n"
class byte_tokenizer final : public tokenizer {
public:
  explicit byte_tokenizer(uint32_t vocab = 257, token eos = 256) : vocab_(vocab), eos_(eos) {}

  uint32_t vocab_size() const override { return vocab_; }
  bool is_end(token t) const override { return t == eos_; }
  result<std::vector<token>> tokenize(std::string_view text, bool, bool) const override;
  std::string piece(token t) const override;
  result<std::string> chat_prompt(std::span<const chat_message> messages) const override;
  bool chat_has_special() const override { return false; }

private:
  uint32_t vocab_;
  token eos_;
};

/// The index of the first byte of an incomplete UTF-8 character at the end of `s`
/// (s.size() when `s` ends on a character boundary).
size_t utf8_complete_prefix(std::string_view s);
/// `s` with every ill-formed UTF-8 sequence replaced by U+FFFD.
std::string utf8_sanitize(std::string_view s);

} // namespace prfaas::engine
