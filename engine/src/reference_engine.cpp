#include "prfaas/engine/reference_engine.hpp"

#include "reference_model.hpp"
#include "sampling.hpp"

#include <cmath>
#include <cstring>
#include <map>

namespace prfaas::engine {

/// One sequence: its record, tensors, linear-state checkpoints and last logits.
struct reference_engine::sequence : sequence_base {
  model_tensors t;
  /// length → per-layer linear states (empty vectors for full layers)
  std::map<uint32_t, std::vector<std::vector<float>>> checkpoints;
  std::vector<float> logits;
};

namespace {

std::vector<std::byte> float_bytes(const float* data, size_t n) {
  std::vector<std::byte> out(n * sizeof(float));
  if (n != 0)
    std::memcpy(out.data(), data, out.size());
  return out;
}

} // namespace

result<std::unique_ptr<reference_engine>> reference_engine::create(const reference_config& c) {
  if (c.layer_pattern.empty() || c.layer_pattern.find_first_not_of("LF") != std::string::npos)
    return make_error("reference engine: layer_pattern must be non-empty letters L/F, got '" +
                      c.layer_pattern + "'");
  if (c.head_dim == 0 || c.head_dim % 8 != 0 || c.head_dim > 64)
    return make_error("reference engine: head_dim must be a multiple of 8 in [8, 64]");
  if (c.n_heads == 0 || c.n_heads * c.head_dim > 512 || c.n_heads > 64)
    return make_error("reference engine: n_heads * head_dim must be in [8, 512]");
  if (c.d_model == 0 || c.d_model > 4096 || c.mlp_hidden == 0 || c.mlp_hidden > 16384)
    return make_error("reference engine: d_model and mlp_hidden must be positive and moderate");
  auto model = std::make_unique<reference_model>(c);
  return std::unique_ptr<reference_engine>(new reference_engine(c, std::move(model)));
}

reference_engine::reference_engine(const reference_config& c, std::unique_ptr<reference_model> m)
    : config_(c), model_(std::move(m)) {
  info_.model = "prfaas-ref-hybrid-" + c.layer_pattern;
  const std::string id = info_.model + "|seed=" + std::to_string(c.weight_seed) +
                         "|d=" + std::to_string(c.d_model) + "|h=" + std::to_string(c.n_heads) +
                         "|hd=" + std::to_string(c.head_dim) +
                         "|mlp=" + std::to_string(c.mlp_hidden);
  info_.fingerprint = checksum(std::as_bytes(std::span(id.data(), id.size())));
  for (uint32_t l = 0; l < model_->n_layers(); ++l)
    info_.layers.push_back(model_->kind(l));
  info_.vocab_size = model_->vocab();
  info_.eos_token = 256;
  info_.end_tokens = {256};
  info_.state_bytes_total = info_.n_linear() * state_bytes_per_layer();
}

reference_engine::~reference_engine() = default;

std::vector<token> reference_engine::tokenize(std::string_view text) {
  std::vector<token> out(text.size());
  for (size_t i = 0; i < text.size(); ++i)
    out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

uint64_t reference_engine::kv_bytes_per_token_layer() const {
  return uint64_t{model_->kv_floats_per_token()} * sizeof(float);
}
uint64_t reference_engine::state_bytes_per_layer() const {
  return uint64_t{model_->state_floats()} * sizeof(float);
}

uint64_t reference_engine::expected_payload(uint32_t layer, uint32_t begin, uint32_t end) const {
  return info_.layers[layer] == layer_kind::full
             ? uint64_t{end - begin} * kv_bytes_per_token_layer()
             : state_bytes_per_layer();
}

kv_chunk reference_engine::kv_chunk_of(const sequence_base& base, uint32_t layer, uint32_t begin,
                                       uint32_t end) const {
  const auto& s = static_cast<const sequence&>(base);
  const size_t row = model_->kv_floats_per_token();
  std::vector<float> rows((end - begin) * row);
  model_->read_kv(s.t.kv[layer], begin, end, rows.data());
  return make_chunk(kv_header(layer, begin, end, s.t.kv[layer].length),
                    float_bytes(rows.data(), rows.size()));
}

kv_chunk reference_engine::state_chunk_of(uint32_t layer, uint32_t length,
                                          const std::vector<float>& st) const {
  return make_chunk(state_header(layer, length), float_bytes(st.data(), st.size()));
}

kv_chunk reference_engine::state_chunk_of(const sequence_base& base, uint32_t layer,
                                          uint32_t at) const {
  const auto& s = static_cast<const sequence&>(base);
  // has_state_at(s, at): `at` is the current length or a recorded checkpoint.
  const auto& states = at == s.rec.tokens.size() ? s.t.state : s.checkpoints.at(at);
  return state_chunk_of(layer, at, states[layer]);
}

bool reference_engine::has_state_at(const sequence_base& base, uint32_t at) const {
  const auto& s = static_cast<const sequence&>(base);
  return at == s.rec.tokens.size() || s.checkpoints.count(at) != 0;
}

void reference_engine::load_chunks(sequence& s, std::span<const kv_chunk> chunks,
                                   uint32_t length) const {
  std::vector<float> rows;
  for (const auto& c : chunks) {
    const auto& h = c.header;
    if (h.kind == layer_kind::full && !c.payload.empty()) {
      // Payload bytes → aligned floats (the byte buffer carries no float alignment).
      rows.resize(c.payload.size() / sizeof(float));
      std::memcpy(rows.data(), c.payload.data(), c.payload.size());
      model_->write_kv(s.t.kv[h.layer], h.token_begin, h.token_end, rows.data());
    } else if (h.kind == layer_kind::linear)
      std::memcpy(s.t.state[h.layer].data(), c.payload.data(), c.payload.size());
  }
  (void)length; // check_chunks guaranteed full coverage of [0, length)
}

token reference_engine::sample(sequence& s) const {
  auto r = sample_token(s.logits, s.rec.sampling, s.rec.sampled++, output_of(s));
  s.logprobs = std::move(r.logprobs);
  return r.id;
}

result<prefill_result> reference_engine::prefill(const prefill_request& req,
                                                 const chunk_sink& sink) {
  const std::string who = "prefill " + seq_str(req.id);
  if (auto ok = check_prefill(req, who); !ok)
    return ok.err();

  auto s = std::make_unique<sequence>();
  s->t = model_->empty_tensors();
  const uint32_t n = static_cast<uint32_t>(req.prompt.size());
  const uint32_t r = req.reuse_tokens;
  if (r > 0) { // check_reuse: req.reuse tiles [0, r) exactly
    load_chunks(*s, req.reuse, r);
    if (req.checkpoint_interval != 0 && r % req.checkpoint_interval == 0)
      s->checkpoints[r] = s->t.state;
  }
  s->rec.tokens.assign(req.prompt.begin(), req.prompt.end());
  s->rec.prompt_tokens = n;
  s->rec.sampling = req.sampling;
  s->rec.sampled = req.sampling.first_index;
  s->logits.resize(model_->vocab());

  auto on_checkpoint = [&](uint32_t layer, uint32_t len, const std::vector<float>& st) {
    auto& cp = s->checkpoints[len];
    cp.resize(info_.n_layers());
    cp[layer] = st;
  };
  auto on_layer = [&](uint32_t layer) {
    if (!sink)
      return;
    if (info_.layers[layer] == layer_kind::full)
      sink(kv_chunk_of(*s, layer, r, n));
    else
      sink(state_chunk_of(layer, n, s->t.state[layer]));
  };
  model_->forward(s->t, r, req.prompt.subspan(r), s->logits, req.checkpoint_interval, on_checkpoint,
                  on_layer);
  prefill_result out;
  out.first_token = sample(*s);
  out.first_logprobs = s->logprobs;
  s->rec.pending = out.first_token;
  out.computed_tokens = n - r;
  out.modeled_time =
      std::chrono::duration_cast<nanos>(std::chrono::duration<double>(prefill_seconds(n - r)));
  if (sink)
    sink(make_meta_chunk(info_, s->rec));
  seqs_.emplace(req.id, std::move(s));
  return out;
}

result<std::vector<token>> reference_engine::decode_step(std::span<const seq_id> batch) {
  if (auto ok = check_batch(batch); !ok)
    return ok.err();
  std::vector<token> out;
  out.reserve(batch.size());
  for (seq_id id : batch) {
    auto& s = static_cast<sequence&>(*seqs_.at(id));
    const token in[1] = {s.rec.pending};
    const auto pos = static_cast<uint32_t>(s.rec.tokens.size());
    s.logits.resize(model_->vocab());
    model_->forward(s.t, pos, in, s.logits, 0, nullptr, nullptr);
    s.rec.tokens.push_back(s.rec.pending);
    s.rec.pending = sample(s);
    out.push_back(s.rec.pending);
  }
  return out;
}

result<void> reference_engine::import_sequence(seq_id id, std::span<const kv_chunk> chunks) {
  auto rec = check_import(id, chunks);
  if (!rec)
    return rec.err();
  auto s = std::make_unique<sequence>();
  s->t = model_->empty_tensors();
  load_chunks(*s, chunks, static_cast<uint32_t>(rec->tokens.size()));
  s->rec = std::move(rec).value();
  seqs_.emplace(id, std::move(s));
  return {};
}

result<std::vector<float>> reference_engine::last_logits(seq_id id) const {
  auto it = seqs_.find(id);
  const auto* s = it == seqs_.end() ? nullptr : static_cast<const sequence*>(it->second.get());
  if (!s || s->logits.empty())
    return make_error("last_logits: no logits for " + seq_str(id));
  return s->logits;
}

double reference_engine::prefill_seconds(uint64_t tokens) const {
  // macs(pos) = A + B·(pos + 1) ⇒ Σ_{pos<l} = l·A + B·l(l+1)/2
  const double b = model_->macs_per_token(1) - model_->macs_per_token(0);
  const double a = model_->macs_per_token(0) - b;
  const double l = static_cast<double>(tokens);
  return (l * a + b * l * (l + 1) / 2) * config_.seconds_per_mac;
}

double reference_engine::decode_seconds(uint32_t batch, uint64_t context) const {
  return batch * model_->macs_per_token(context) * config_.seconds_per_mac;
}

double reference_engine::kv_bytes(uint64_t tokens) const {
  return static_cast<double>(tokens * info_.n_full() * kv_bytes_per_token_layer() +
                             info_.state_bytes_total);
}

} // namespace prfaas::engine
