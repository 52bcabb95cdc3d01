#include "gateway/output_text.hpp"

#include <algorithm>

namespace prfaas::serving {

void output_delta::append(output_delta&& more) {
  text += more.text;
  tokens.insert(tokens.end(), more.tokens.begin(), more.tokens.end());
  for (auto& e : more.logprobs)
    logprobs.push_back(std::move(e));
}

output_text::output_text(std::shared_ptr<const engine::tokenizer> tok,
                         std::vector<std::string> stops, bool logprobs)
    : tok_(std::move(tok)), logprobs_(logprobs) {
  for (auto& s : stops)
    if (!s.empty())
      stops_.push_back(std::move(s));
}

logprob_entry output_text::entry_of(const engine::sampled_logprobs& lp) const {
  logprob_entry e;
  e.token = tok_->piece(lp.chosen.id);
  e.logprob = lp.chosen.logprob;
  for (auto& t : lp.top)
    e.top.emplace_back(tok_->piece(t.id), t.logprob);
  return e;
}

output_delta output_text::release(size_t upto, bool all_tokens) {
  output_delta d;
  const size_t n = upto - released_;
  const std::string_view raw(held_.data(), n);
  d.text = engine::utf8_sanitize(raw);
  // Tokens whose bytes begin in what goes out now (or, at the end, all that are left).
  size_t k = 0;
  for (; k < queue_.size(); ++k) {
    auto& p = queue_[k];
    const bool begins = p.begin < upto || (p.begin == p.end && p.begin <= upto);
    if (!all_tokens && !begins)
      break;
    d.tokens.push_back(p.id);
    if (logprobs_ && p.lp) {
      auto e = entry_of(*p.lp);
      // A token that begins inside a character is placed where that character begins.
      const auto before = raw.substr(0, std::min(p.begin, upto) - released_);
      e.text_offset =
          text_len_ +
          engine::utf8_sanitize(before.substr(0, engine::utf8_complete_prefix(before))).size();
      d.logprobs.push_back(std::move(e));
    }
  }
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(k));
  held_.erase(0, n);
  released_ = upto;
  text_len_ += d.text.size();
  return d;
}

output_delta output_text::feed(token t, const engine::sampled_logprobs* lp) {
  if (stopped_)
    return {};
  ++fed_;
  const std::string piece = tok_->piece(t);
  queue_.push_back({t, total_, total_ + piece.size(),
                    lp ? std::optional<engine::sampled_logprobs>(*lp) : std::nullopt});
  held_ += piece;
  total_ += piece.size();
  // A stop string anywhere in what is held ends the output where it begins.
  size_t stop_at = std::string::npos;
  for (auto& s : stops_)
    stop_at = std::min(stop_at, held_.find(s));
  if (stop_at != std::string::npos) {
    stopped_ = true;
    auto d = release(released_ + stop_at, false);
    queue_.clear(); // tokens past the stop string's start are not part of the output
    held_.clear();
    return d;
  }
  // Hold back an incomplete character, and the longest end that could begin a stop string.
  size_t keep = held_.size() - engine::utf8_complete_prefix(held_);
  for (auto& s : stops_)
    for (size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len)
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
  // Never end what goes out inside a character (a held stop prefix may begin mid-way).
  size_t cut = held_.size() - keep;
  for (int back = 0; back < 3 && cut > 0 && cut < held_.size() &&
                     (static_cast<unsigned char>(held_[cut]) & 0xC0) == 0x80;
       ++back)
    --cut;
  return release(released_ + cut, false);
}

output_delta output_text::finish() {
  if (stopped_)
    return {};
  return release(total_, true);
}

} // namespace prfaas::serving
