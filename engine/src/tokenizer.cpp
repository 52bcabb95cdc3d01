#include "prfaas/engine/tokenizer.hpp"

namespace prfaas::engine {

namespace {

/// Length of a well-formed UTF-8 sequence starting at s[i], 0 when ill-formed, or -1
/// when it is a well-formed beginning that `s` cuts short.
int utf8_seq(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80)
    return 1;
  int n;
  unsigned char lo = 0x80, hi = 0xBF; // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0)
      lo = 0xA0; // no overlong forms
    if (c == 0xED)
      hi = 0x9F; // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0)
      lo = 0x90;
    if (c == 0xF4)
      hi = 0x8F; // nothing above U+10FFFF
  } else
    return 0;
  for (int k = 1; k < n; ++k) {
    if (i + k >= s.size())
      return -1;
    const unsigned char x = b(i + k);
    if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF))
      return 0;
  }
  return n;
}

constexpr std::string_view replacement = "\xEF\xBF\xBD"; // U+FFFD

} // namespace

size_t utf8_complete_prefix(std::string_view s) {
  // An incomplete character is a lead byte within the last three bytes whose
  // continuation bytes are all there so far but too few.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const size_t i = s.size() - back;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80)
      break; // ASCII: nothing after it can be a cut-short character's start
    if (c >= 0xC0)
      return utf8_seq(s, i) == -1 ? i : s.size();
  }
  return s.size();
}

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const int n = utf8_seq(s, i);
    if (n > 0) {
      out.append(s.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    } else {
      out.append(replacement);
      ++i;
    }
  }
  return out;
}

std::string detokenizer::feed(token tk) {
  held_ += t_->piece(tk);
  const size_t keep = utf8_complete_prefix(held_);
  std::string out = utf8_sanitize(std::string_view(held_).substr(0, keep));
  held_.erase(0, keep);
  return out;
}

std::string detokenizer::flush() {
  std::string out = utf8_sanitize(held_);
  held_.clear();
  return out;
}

result<std::vector<token>> byte_tokenizer::tokenize(std::string_view text, bool, bool) const {
  std::vector<token> out(text.size());
  for (size_t i = 0; i < text.size(); ++i)
    out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::string byte_tokenizer::piece(token t) const {
  if (t == eos_)
    return {};
  if (t >= 0 && t < 256)
    return std::string(1, static_cast<char>(t));
  return std::string(1, static_cast<char>('a' + (static_cast<uint32_t>(t) % 26)));
}

result<std::string> byte_tokenizer::chat_prompt(std::span<const chat_message> messages) const {
  std::string out;
  for (auto& m : messages)
    out += "<|" + m.role + "|>\n" + m.content + "\n";
  out += "<|assistant|>\n";
  return out;
}

} // namespace prfaas::engine
