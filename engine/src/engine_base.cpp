#include "prfaas/engine/engine_base.hpp"

#include "prfaas/engine/chunk_check.hpp"

#include "sampling.hpp"

#include <algorithm>
#include <cmath>

#include <unordered_set>

namespace prfaas::engine {

namespace {

/// Prompts beyond this are rejected (the wire format's token fields are 32-bit).
constexpr size_t max_tokens = size_t{1} << 24;

} // namespace

std::string engine_base::seq_str(seq_id id) {
  return "sequence " + std::to_string(id);
}

result<std::vector<kv_chunk>> engine_base::export_sequence(seq_id id) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error("export: unknown " + seq_str(id));
  const sequence_base& s = *it->second;
  const auto n = static_cast<uint32_t>(s.rec.tokens.size());
  std::vector<kv_chunk> out;
  for (uint32_t l = 0; l < info_.n_layers(); ++l)
    out.push_back(info_.layers[l] == layer_kind::full ? kv_chunk_of(s, l, 0, n)
                                                      : state_chunk_of(s, l, n));
  out.push_back(make_meta_chunk(info_, s.rec));
  for (size_t i = 0; i < out.size(); ++i)
    out[i].header.sequence_no = static_cast<uint32_t>(i);
  return out;
}

result<std::vector<kv_chunk>> engine_base::export_kv(seq_id id, uint32_t begin,
                                                     uint32_t end) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error("export_kv: unknown " + seq_str(id));
  const uint32_t n = length(id);
  if (begin >= end || end > n)
    return make_error("export_kv " + seq_str(id) + ": invalid range [" + std::to_string(begin) +
                      ", " + std::to_string(end) + ") of " + std::to_string(n) + " tokens");
  std::vector<kv_chunk> out;
  for (uint32_t l = 0; l < info_.n_layers(); ++l)
    if (info_.layers[l] == layer_kind::full)
      out.push_back(kv_chunk_of(*it->second, l, begin, end));
  return out;
}

result<std::vector<kv_chunk>> engine_base::export_checkpoint(seq_id id, uint32_t at) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error("export_checkpoint: unknown " + seq_str(id));
  if (!has_state_at(*it->second, at))
    return make_error("export_checkpoint " + seq_str(id) + ": no linear-state checkpoint at " +
                      std::to_string(at) + " tokens");
  std::vector<kv_chunk> out;
  for (uint32_t l = 0; l < info_.n_layers(); ++l)
    if (info_.layers[l] == layer_kind::linear)
      out.push_back(state_chunk_of(*it->second, l, at));
  return out;
}

void engine_base::release(seq_id id) {
  seqs_.erase(id);
}

std::optional<sampled_logprobs> engine_base::last_logprobs(seq_id id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? std::nullopt : it->second->logprobs;
}

std::span<const token> engine_base::output_of(const sequence_base& s) {
  return output_window(s.rec.tokens, s.rec.prompt_tokens, s.rec.sampling.first_index);
}

result<void> engine_base::check_identity(std::span<const std::byte> identity) const {
  if (identity.size() == info_.identity.size() &&
      std::equal(identity.begin(), identity.end(), info_.identity.begin()))
    return {};
  return make_error("state from another model (its identity differs from " + info_.model + "'s)");
}

uint32_t engine_base::length(seq_id id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? 0 : static_cast<uint32_t>(it->second->rec.tokens.size());
}

chunk_header engine_base::kv_header(uint32_t layer, uint32_t begin, uint32_t end,
                                    uint32_t total) const {
  chunk_header h;
  h.kind = layer_kind::full;
  h.model_fingerprint = info_.fingerprint;
  h.layer = layer;
  h.n_layers = info_.n_layers();
  h.token_begin = begin;
  h.token_end = end;
  h.total_tokens = total;
  return h;
}

chunk_header engine_base::state_header(uint32_t layer, uint32_t at) const {
  chunk_header h = kv_header(layer, 0, at, at);
  h.kind = layer_kind::linear;
  return h;
}

result<void> engine_base::check_prompt(const prefill_request& req, const std::string& who) const {
  if (seqs_.count(req.id))
    return make_error(who + ": id already in use");
  if (req.prompt.empty() || req.prompt.size() > max_tokens)
    return make_error(who + ": prompt length " + std::to_string(req.prompt.size()) +
                      " outside [1, " + std::to_string(max_tokens) + "]");
  for (size_t i = 0; i < req.prompt.size(); ++i)
    if (req.prompt[i] < 0 || req.prompt[i] >= static_cast<token>(info_.vocab_size))
      return make_error(who + ": token " + std::to_string(i) + " = " +
                        std::to_string(req.prompt[i]) + " outside vocab");
  return {};
}

result<void> engine_base::check_prefill(const prefill_request& req, const std::string& who) const {
  if (auto ok = check_prompt(req, who); !ok)
    return ok;
  if (!std::isfinite(req.sampling.temperature) || req.sampling.temperature < 0.0f)
    return make_error(who + ": invalid sampling temperature");
  return check_reuse(req, who);
}

result<void> engine_base::check_reuse(const prefill_request& req, const std::string& who) const {
  if (req.reuse_tokens >= req.prompt.size())
    return make_error(who + ": reuse of " + std::to_string(req.reuse_tokens) +
                      " tokens leaves nothing to compute in a prompt of " +
                      std::to_string(req.prompt.size()));
  if (req.reuse_tokens == 0 && !req.reuse.empty())
    return make_error(who + ": reuse chunks given with reuse_tokens == 0");
  if (req.reuse_tokens == 0)
    return {};
  auto checked = check_chunks(
      info_, req.reuse, req.reuse_tokens, false,
      [this](uint32_t l, uint32_t b, uint32_t e) { return expected_payload(l, b, e); });
  if (!checked)
    return make_error(who + ": reuse rejected: " + checked.message());
  return {};
}

result<void> engine_base::check_batch(std::span<const seq_id> batch) const {
  std::unordered_set<seq_id> seen;
  for (seq_id id : batch) {
    if (!seqs_.count(id))
      return make_error("decode: unknown " + seq_str(id));
    if (!seen.insert(id).second)
      return make_error("decode: " + seq_str(id) + " appears twice in one batch");
  }
  return {};
}

result<sequence_record> engine_base::check_import(seq_id id,
                                                  std::span<const kv_chunk> chunks) const {
  const std::string who = "import " + seq_str(id);
  if (seqs_.count(id))
    return make_error(who + ": id already in use");
  // The exporter's identity first: "another quantisation" says more than "fingerprint
  // mismatch". Only an intact meta chunk is read for it (a corrupted one is reported
  // as such by check_chunks below).
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto& c = chunks[i];
    if (c.header.kind != layer_kind::meta || c.header.version != chunk_header::current_version ||
        c.header.payload_bytes != c.payload.size() || checksum(c.payload) != c.header.payload_xxh3)
      continue;
    auto identity = meta_identity(c.payload);
    if (!identity)
      return make_error(who + ": " + chunk_label(i, c.header) + ": " + identity.message());
    if (auto ok = check_identity(*identity); !ok)
      return make_error(who + ": " + ok.message());
    break;
  }
  auto checked = check_chunks(info_, chunks, 0, true, [this](uint32_t l, uint32_t b, uint32_t e) {
    return expected_payload(l, b, e);
  });
  if (!checked)
    return make_error(who + ": " + checked.message());
  const kv_chunk& meta = chunks[*checked->meta];
  auto rec = parse_meta_payload(meta.payload, info_, chunk_label(*checked->meta, meta.header));
  if (!rec)
    return make_error(who + ": " + rec.message());
  if (rec->tokens.size() != checked->length || checked->length == 0)
    return make_error(who + ": meta chunk lists " + std::to_string(rec->tokens.size()) +
                      " tokens but covers " + std::to_string(checked->length));
  return rec;
}

} // namespace prfaas::engine
