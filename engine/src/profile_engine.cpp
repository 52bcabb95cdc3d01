#include "prfaas/engine/profile_engine.hpp"

#include "prfaas/engine/chunk_check.hpp"
#include "prfaas/engine/rng.hpp"
#include "prfaas/engine/sequence_record.hpp"

#include <cmath>
#include <cstring>
#include <unordered_set>

namespace prfaas::engine {

/// A sequence is its record plus a running digest of its tokens; all bytes are
/// regenerated from (seed, layer, digest) on demand, so nothing big is stored.
struct profile_engine::sequence {
  sequence_record rec;
  std::vector<uint64_t> digest; ///< digest[i] covers tokens [0, i]

  uint64_t digest_at(uint32_t len, uint64_t seed) const { // covers tokens [0, len)
    return len == 0 ? mix64(seed ^ 0x656d707479ULL) : digest[len - 1];
  }
  void append(token t, uint64_t seed) {
    const uint64_t prev = digest.empty() ? mix64(seed ^ 0x656d707479ULL) : digest.back();
    digest.push_back(mix64(prev ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 1) *
                                      0x9e3779b97f4a7c15ULL));
  }
};

namespace {

constexpr uint32_t vocab = 163840; // Kimi-style vocabulary for synthetic decode tokens
constexpr size_t max_tokens = size_t{1} << 24;

/// Deterministic bytes: word k of the stream is mix64(s + k·golden).
void fill(std::byte* out, size_t n, uint64_t s) {
  size_t k = 0;
  for (; n >= 8; n -= 8, out += 8, ++k) {
    const uint64_t w = mix64(s + k * 0x9e3779b97f4a7c15ULL);
    std::memcpy(out, &w, 8);
  }
  if (n != 0) {
    const uint64_t w = mix64(s + k * 0x9e3779b97f4a7c15ULL);
    std::memcpy(out, &w, n);
  }
}

std::string seq_str(seq_id id) { return "sequence " + std::to_string(id); }

} // namespace

result<std::unique_ptr<profile_engine>> profile_engine::create(profile prof,
                                                               profile_engine_config config,
                                                               clock& clk) {
  if (!prof.has_timing())
    return make_error("profile engine: profile '" + prof.name +
                      "' has no prefill_points (phi-only profiles cannot drive an engine)");
  if (!(config.kv_scale > 0.0) || config.kv_scale > 1.0)
    return make_error("profile engine: kv_scale must be in (0, 1]");
  return std::unique_ptr<profile_engine>(new profile_engine(std::move(prof), config, clk));
}

profile_engine::profile_engine(profile prof, profile_engine_config config, clock& clk)
    : profile_(std::move(prof)), config_(config), clock_(clk) {
  info_.model = profile_.model;
  for (uint32_t l = 0; l < profile_.layers; ++l)
    info_.layers.push_back((l + 1) % (profile_.linear_per_full + 1) == 0 ? layer_kind::full
                                                                         : layer_kind::linear);
  info_.vocab_size = vocab;
  info_.eos_token = 0;
  // The KV layout (not the hardware) decides compatibility: an H200 prefill's chunks
  // import into an H20 decode instance of the same model.
  std::string id = "profile|" + profile_.model + "|" + std::to_string(profile_.layers) + "|" +
                   std::to_string(profile_.linear_per_full) + "|scale=" +
                   std::to_string(config_.kv_scale) + "|seed=" + std::to_string(config_.seed);
  for (const auto& p : profile_.points)
    if (p.has_kv)
      id += "|" + std::to_string(p.tokens) + ":" + std::to_string(p.kv_mib);
  info_.fingerprint = checksum(std::as_bytes(std::span(id.data(), id.size())));
  info_.state_bytes_total = info_.n_linear() * state_layer_bytes();
}

profile_engine::~profile_engine() = default;

uint64_t profile_engine::state_layer_bytes() const {
  const uint32_t n = std::max<uint32_t>(1, info_.n_linear());
  return static_cast<uint64_t>(std::floor(profile_.kv_bytes(0) * config_.kv_scale / n));
}

uint64_t profile_engine::kv_layer_cumulative(uint64_t tokens) const {
  const uint32_t n = std::max<uint32_t>(1, info_.n_full());
  const double kv = (profile_.kv_bytes(tokens) - profile_.kv_bytes(0)) * config_.kv_scale;
  return static_cast<uint64_t>(std::floor(std::max(0.0, kv) / n));
}

uint64_t profile_engine::buffer_bytes(uint64_t tokens) const {
  return info_.n_full() * kv_layer_cumulative(tokens) + info_.n_linear() * state_layer_bytes();
}

uint64_t profile_engine::expected_payload(uint32_t layer, uint32_t begin, uint32_t end) const {
  if (info_.layers[layer] == layer_kind::linear)
    return state_layer_bytes();
  return kv_layer_cumulative(end) - kv_layer_cumulative(begin);
}

kv_chunk profile_engine::kv_chunk_of(const sequence& s, uint32_t layer, uint32_t begin,
                                     uint32_t end) const {
  std::vector<std::byte> payload(expected_payload(layer, begin, end));
  uint64_t off = 0;
  uint64_t cum = kv_layer_cumulative(begin);
  for (uint32_t t = begin; t < end; ++t) {
    const uint64_t next = kv_layer_cumulative(t + 1);
    fill(payload.data() + off, next - cum, mix64(s.digest[t] ^ (uint64_t{layer} << 32)));
    off += next - cum;
    cum = next;
  }
  chunk_header h;
  h.kind = layer_kind::full;
  h.model_fingerprint = info_.fingerprint;
  h.layer = layer;
  h.n_layers = info_.n_layers();
  h.token_begin = begin;
  h.token_end = end;
  h.total_tokens = static_cast<uint32_t>(s.rec.tokens.size());
  return make_chunk(h, std::move(payload));
}

kv_chunk profile_engine::state_chunk_of(const sequence& s, uint32_t layer, uint32_t at) const {
  std::vector<std::byte> payload(state_layer_bytes());
  fill(payload.data(), payload.size(),
       mix64(s.digest_at(at, config_.seed) ^ (uint64_t{layer} << 32) ^ 0x7374617465ULL));
  chunk_header h;
  h.kind = layer_kind::linear;
  h.model_fingerprint = info_.fingerprint;
  h.layer = layer;
  h.n_layers = info_.n_layers();
  h.token_begin = 0;
  h.token_end = at;
  h.total_tokens = at;
  return make_chunk(h, std::move(payload));
}

result<void> profile_engine::verify(const sequence& s, std::span<const kv_chunk> chunks,
                                    const std::string& who) const {
  if (!config_.verify_content)
    return {};
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto& h = chunks[i].header;
    if (h.kind == layer_kind::meta)
      continue;
    const kv_chunk want = h.kind == layer_kind::full
                              ? kv_chunk_of(s, h.layer, h.token_begin, h.token_end)
                              : state_chunk_of(s, h.layer, h.token_end);
    if (want.payload != chunks[i].payload)
      return make_error(who + ": " + chunk_label(i, h) +
                        ": content does not match the sequence's tokens (wrong sequence?)");
  }
  return {};
}

void profile_engine::spend(double seconds) {
  if (config_.sleep && seconds > 0)
    clock_.sleep_for(std::chrono::duration_cast<nanos>(std::chrono::duration<double>(seconds)));
}

result<prefill_result> profile_engine::prefill(const prefill_request& req,
                                               const chunk_sink& sink) {
  const std::string who = "prefill " + seq_str(req.id);
  if (seqs_.count(req.id))
    return make_error(who + ": id already in use");
  if (req.prompt.empty() || req.prompt.size() > max_tokens)
    return make_error(who + ": prompt length " + std::to_string(req.prompt.size()) +
                      " outside [1, " + std::to_string(max_tokens) + "]");
  for (size_t i = 0; i < req.prompt.size(); ++i)
    if (req.prompt[i] < 0 || req.prompt[i] >= static_cast<token>(vocab))
      return make_error(who + ": token " + std::to_string(i) + " outside vocab");
  if (req.reuse_tokens >= req.prompt.size())
    return make_error(who + ": reuse leaves nothing to compute");
  if (req.reuse_tokens == 0 && !req.reuse.empty())
    return make_error(who + ": reuse chunks given with reuse_tokens == 0");
  auto s = std::make_unique<sequence>();
  for (token t : req.prompt) {
    s->rec.tokens.push_back(t);
    s->append(t, config_.seed);
  }
  const uint32_t n = static_cast<uint32_t>(req.prompt.size());
  const uint32_t r = req.reuse_tokens;
  if (r > 0) {
    auto checked = check_chunks(info_, req.reuse, r, false,
                                [this](uint32_t l, uint32_t b, uint32_t e) {
                                  return expected_payload(l, b, e);
                                });
    if (!checked)
      return make_error(who + ": reuse rejected: " + checked.message());
    if (auto v = verify(*s, req.reuse, who + ": reuse rejected"); !v)
      return v.err();
  }
  s->rec.prompt_tokens = n;
  s->rec.sampling = req.sampling;
  const double total = prefill_seconds(n - r);
  for (uint32_t l = 0; l < info_.n_layers(); ++l) {
    spend(total / info_.n_layers());
    if (sink)
      sink(info_.layers[l] == layer_kind::full ? kv_chunk_of(*s, l, r, n)
                                               : state_chunk_of(*s, l, n));
  }
  const uint64_t draw = mix64(s->digest.back() ^ mix64(req.sampling.seed + 0));
  s->rec.pending = static_cast<token>(draw % vocab);
  s->rec.sampled = 1;
  prefill_result out;
  out.first_token = s->rec.pending;
  out.computed_tokens = n - r;
  out.modeled_time =
      std::chrono::duration_cast<nanos>(std::chrono::duration<double>(total));
  if (sink)
    sink(make_meta_chunk(info_, s->rec));
  seqs_.emplace(req.id, std::move(s));
  return out;
}

result<std::vector<token>> profile_engine::decode_step(std::span<const seq_id> batch) {
  std::unordered_set<seq_id> seen;
  uint64_t ctx = 0;
  for (seq_id id : batch) {
    auto it = seqs_.find(id);
    if (it == seqs_.end())
      return make_error("decode: unknown " + seq_str(id));
    if (!seen.insert(id).second)
      return make_error("decode: " + seq_str(id) + " appears twice in one batch");
    ctx += it->second->rec.tokens.size();
  }
  if (!batch.empty())
    spend(decode_seconds(static_cast<uint32_t>(batch.size()), ctx / batch.size()));
  std::vector<token> out;
  for (seq_id id : batch) {
    sequence& s = *seqs_.at(id);
    s.rec.tokens.push_back(s.rec.pending);
    s.append(s.rec.pending, config_.seed);
    const uint64_t draw = mix64(s.digest.back() ^ mix64(s.rec.sampling.seed + s.rec.sampled));
    s.rec.pending = static_cast<token>(draw % vocab);
    ++s.rec.sampled;
    out.push_back(s.rec.pending);
  }
  return out;
}

result<std::vector<kv_chunk>> profile_engine::export_sequence(seq_id id) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error("export: unknown " + seq_str(id));
  const sequence& s = *it->second;
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

result<std::vector<kv_chunk>> profile_engine::export_kv(seq_id id, uint32_t begin,
                                                        uint32_t end) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error("export_kv: unknown " + seq_str(id));
  if (begin >= end || end > length(id))
    return make_error("export_kv " + seq_str(id) + ": invalid range");
  std::vector<kv_chunk> out;
  for (uint32_t l = 0; l < info_.n_layers(); ++l)
    if (info_.layers[l] == layer_kind::full)
      out.push_back(kv_chunk_of(*it->second, l, begin, end));
  return out;
}

result<std::vector<kv_chunk>> profile_engine::export_checkpoint(seq_id id, uint32_t at) const {
  // Synthetic state is a function of the prefix, so any length up to the current one
  // can be "checkpointed".
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error("export_checkpoint: unknown " + seq_str(id));
  if (at == 0 || at > length(id))
    return make_error("export_checkpoint " + seq_str(id) + ": no state at " + std::to_string(at));
  std::vector<kv_chunk> out;
  for (uint32_t l = 0; l < info_.n_layers(); ++l)
    if (info_.layers[l] == layer_kind::linear)
      out.push_back(state_chunk_of(*it->second, l, at));
  return out;
}

result<void> profile_engine::import_sequence(seq_id id, std::span<const kv_chunk> chunks) {
  const std::string who = "import " + seq_str(id);
  if (seqs_.count(id))
    return make_error(who + ": id already in use");
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
    return make_error(who + ": meta chunk token count does not match the KV length");
  auto s = std::make_unique<sequence>();
  s->rec = std::move(rec).value();
  for (token t : s->rec.tokens)
    s->append(t, config_.seed);
  if (auto v = verify(*s, chunks, who); !v)
    return v.err();
  seqs_.emplace(id, std::move(s));
  return {};
}

void profile_engine::release(seq_id id) { seqs_.erase(id); }

uint32_t profile_engine::length(seq_id id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? 0 : static_cast<uint32_t>(it->second->rec.tokens.size());
}

} // namespace prfaas::engine
