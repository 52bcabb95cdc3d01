#include "prfaas/engine/profile_engine.hpp"

#include "prfaas/engine/rng.hpp"

#include <cmath>
#include <stdexcept>
#include <cstring>

namespace prfaas::engine {

/// A sequence is its record plus a running digest of its tokens; all bytes are
/// regenerated from (seed, layer, digest) on demand, so nothing big is stored.
/// Without synthesized content no byte is derived from a digest but the last one
/// (which samples the next token): then only that one is kept.
struct profile_engine::sequence : sequence_base {
  explicit sequence(bool keep_all) : keep_all(keep_all) {}

  bool keep_all;
  std::vector<uint64_t> digest; ///< digest[i] covers tokens [0, i] (when keep_all)
  uint64_t last = 0;            ///< covers every token appended
  size_t count = 0;             ///< tokens appended

  static uint64_t empty_digest(uint64_t seed) { return mix64(seed ^ 0x656d707479ULL); }
  uint64_t digest_at(uint32_t len, uint64_t seed) const { // covers tokens [0, len)
    if (len == 0)
      return empty_digest(seed);
    if (!keep_all && len != count)
      throw std::logic_error("profile engine: digest at " + std::to_string(len) + " of " +
                             std::to_string(count) + " tokens was not kept");
    return keep_all ? digest[len - 1] : last;
  }
  void append(token t, uint64_t seed) {
    const uint64_t prev = count == 0 ? empty_digest(seed) : last;
    last =
        mix64(prev ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 1) * 0x9e3779b97f4a7c15ULL);
    ++count;
    if (keep_all)
      digest.push_back(last);
  }
  void reserve(size_t n) {
    if (keep_all)
      digest.reserve(n);
  }
};

namespace {

constexpr uint32_t vocab = 163840; // Kimi-style vocabulary for synthetic decode tokens

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

} // namespace

result<std::unique_ptr<profile_engine>>
profile_engine::create(profile prof, profile_engine_config config, clock& clk) {
  if (!prof.has_timing())
    return make_error("profile engine: profile '" + prof.name +
                      "' has no prefill_points (phi-only profiles cannot drive an engine)");
  if (!(config.kv_scale > 0.0) || config.kv_scale > 1.0)
    return make_error("profile engine: kv_scale must be in (0, 1]");
  if (!config.synthesize_content && config.verify_content)
    return make_error("profile engine: verify_content needs synthesized content");
  return std::unique_ptr<profile_engine>(new profile_engine(std::move(prof), config, clk));
}

profile_engine::profile_engine(profile prof, profile_engine_config config, clock& clk)
    : profile_(std::move(prof)), config_(config), clock_(clk), kv_knots_(profile_.kv_knots()) {
  kv_at_zero_ = kv_bytes(0);
  info_.model = profile_.model;
  for (uint32_t l = 0; l < profile_.layers; ++l)
    info_.layers.push_back((l + 1) % (profile_.linear_per_full + 1) == 0 ? layer_kind::full
                                                                         : layer_kind::linear);
  info_.vocab_size = vocab;
  info_.eos_token = 0;
  info_.end_tokens = {0};
  // The KV layout (not the hardware) decides compatibility: an H200 prefill's chunks
  // import into an H20 decode instance of the same model.
  std::string id = "profile|" + profile_.model + "|" + std::to_string(profile_.layers) + "|" +
                   std::to_string(profile_.linear_per_full) +
                   "|scale=" + std::to_string(config_.kv_scale) +
                   "|seed=" + std::to_string(config_.seed);
  for (const auto& p : profile_.points)
    if (p.has_kv)
      id += "|" + std::to_string(p.tokens) + ":" + std::to_string(p.kv_mib);
  info_.fingerprint = checksum(std::as_bytes(std::span(id.data(), id.size())));
  n_full_ = info_.n_full();
  n_linear_ = info_.n_linear();
  info_.state_bytes_total = n_linear_ * state_layer_bytes();
}

profile_engine::~profile_engine() = default;

uint64_t profile_engine::state_layer_bytes() const {
  const uint32_t n = std::max<uint32_t>(1, n_linear_);
  return static_cast<uint64_t>(std::floor(kv_at_zero_ * config_.kv_scale / n));
}

uint64_t profile_engine::kv_layer_cumulative(uint64_t tokens) const {
  const uint32_t n = std::max<uint32_t>(1, n_full_);
  const double kv = (kv_bytes(tokens) - kv_at_zero_) * config_.kv_scale;
  return static_cast<uint64_t>(std::floor(std::max(0.0, kv) / n));
}

uint64_t profile_engine::buffer_bytes(uint64_t tokens) const {
  return n_full_ * kv_layer_cumulative(tokens) + n_linear_ * state_layer_bytes();
}

uint64_t profile_engine::expected_payload(uint32_t layer, uint32_t begin, uint32_t end) const {
  if (info_.layers[layer] == layer_kind::linear)
    return state_layer_bytes();
  return kv_layer_cumulative(end) - kv_layer_cumulative(begin);
}

kv_chunk profile_engine::kv_chunk_of(const sequence_base& base, uint32_t layer, uint32_t begin,
                                     uint32_t end) const {
  const auto& s = static_cast<const sequence&>(base);
  std::vector<std::byte> payload(expected_payload(layer, begin, end));
  if (!config_.synthesize_content)
    return make_chunk(kv_header(layer, begin, end, static_cast<uint32_t>(s.rec.tokens.size())),
                      std::move(payload));
  // kv_layer_cumulative(t) for t rising, the segment found once instead of per token:
  // the same operations in the same order as interpolate(), so the same bytes.
  const uint32_t n = std::max<uint32_t>(1, n_full_);
  size_t seg = 1;
  auto cumulative = [&](uint64_t tokens) -> uint64_t {
    const double x = static_cast<double>(tokens);
    const auto& xy = kv_knots_;
    while (seg + 1 < xy.size() && x > xy[seg].first)
      ++seg;
    double y;
    if (x == xy[seg].first)
      y = xy[seg].second;
    else if (x == xy[0].first)
      y = xy[0].second;
    else {
      const auto [x0, y0] = xy[seg - 1];
      const auto [x1, y1] = xy[seg];
      y = y0 + (y1 - y0) * (x - x0) / (x1 - x0);
    }
    const double kv = (std::max(0.0, y) - kv_at_zero_) * config_.kv_scale;
    return static_cast<uint64_t>(std::floor(std::max(0.0, kv) / n));
  };
  uint64_t off = 0;
  uint64_t cum = cumulative(begin);
  for (uint32_t t = begin; t < end; ++t) {
    const uint64_t next = cumulative(t + 1);
    const uint64_t len = std::min(next - cum, payload.size() - off);
    fill(payload.data() + off, len,
         mix64(s.digest_at(t + 1, config_.seed) ^ (uint64_t{layer} << 32)));
    off += len;
    cum = next;
  }
  if (off != payload.size() || cum - kv_layer_cumulative(begin) != payload.size())
    throw std::logic_error("profile engine: chunk of layer " + std::to_string(layer) + " cut to " +
                           std::to_string(off) + " bytes, expected " +
                           std::to_string(payload.size()));
  return make_chunk(kv_header(layer, begin, end, static_cast<uint32_t>(s.rec.tokens.size())),
                    std::move(payload));
}

kv_chunk profile_engine::state_chunk_of(const sequence_base& base, uint32_t layer,
                                        uint32_t at) const {
  const auto& s = static_cast<const sequence&>(base);
  std::vector<std::byte> payload(state_layer_bytes());
  if (config_.synthesize_content)
    fill(payload.data(), payload.size(),
         mix64(s.digest_at(at, config_.seed) ^ (uint64_t{layer} << 32) ^ 0x7374617465ULL));
  return make_chunk(state_header(layer, at), std::move(payload));
}

bool profile_engine::has_state_at(const sequence_base& s, uint32_t at) const {
  return at != 0 && at <= s.rec.tokens.size();
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

result<prefill_result> profile_engine::prefill(const prefill_request& req, const chunk_sink& sink) {
  const std::string who = "prefill " + seq_str(req.id);
  if (auto ok = check_prompt(req, who); !ok)
    return ok.err();
  if (auto ok = check_reuse(req, who); !ok)
    return ok.err();
  auto s = std::make_unique<sequence>(config_.synthesize_content);
  s->rec.tokens.reserve(req.prompt.size());
  s->reserve(req.prompt.size());
  for (token t : req.prompt) {
    s->rec.tokens.push_back(t);
    s->append(t, config_.seed);
  }
  const uint32_t n = static_cast<uint32_t>(req.prompt.size());
  const uint32_t r = req.reuse_tokens;
  if (r > 0) { // check_reuse: req.reuse tiles [0, r) exactly; its bytes must be this prompt's
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
  const uint64_t draw = mix64(s->last ^ mix64(req.sampling.seed + req.sampling.first_index));
  s->rec.pending = static_cast<token>(draw % vocab);
  s->rec.sampled = req.sampling.first_index + 1;
  prefill_result out;
  out.first_token = s->rec.pending;
  out.computed_tokens = n - r;
  out.modeled_time = std::chrono::duration_cast<nanos>(std::chrono::duration<double>(total));
  if (sink)
    sink(make_meta_chunk(info_, s->rec));
  seqs_.emplace(req.id, std::move(s));
  return out;
}

result<std::vector<token>> profile_engine::decode_step(std::span<const seq_id> batch) {
  if (auto ok = check_batch(batch); !ok)
    return ok.err();
  uint64_t ctx = 0;
  for (seq_id id : batch)
    ctx += length(id);
  if (!batch.empty())
    spend(decode_seconds(static_cast<uint32_t>(batch.size()), ctx / batch.size()));
  std::vector<token> out;
  for (seq_id id : batch) {
    auto& s = static_cast<sequence&>(*seqs_.at(id));
    s.rec.tokens.push_back(s.rec.pending);
    s.append(s.rec.pending, config_.seed);
    const uint64_t draw = mix64(s.last ^ mix64(s.rec.sampling.seed + s.rec.sampled));
    s.rec.pending = static_cast<token>(draw % vocab);
    ++s.rec.sampled;
    out.push_back(s.rec.pending);
  }
  return out;
}

result<void> profile_engine::import_sequence(seq_id id, std::span<const kv_chunk> chunks) {
  auto rec = check_import(id, chunks);
  if (!rec)
    return rec.err();
  auto s = std::make_unique<sequence>(config_.synthesize_content);
  s->rec = std::move(rec).value();
  s->reserve(s->rec.tokens.size());
  for (token t : s->rec.tokens)
    s->append(t, config_.seed);
  if (auto v = verify(*s, chunks, "import " + seq_str(id)); !v)
    return v.err();
  seqs_.emplace(id, std::move(s));
  return {};
}

} // namespace prfaas::engine
