// The llama engine's sequences (engine_impl.hpp): llama seq ids ("slots") and the
// sequences parked in host memory beyond them, parsed snapshots of a sequence's state
// for exports, recurrent-state checkpoints, and rebuilding a state from chunks.

#include "llama/engine_impl.hpp"

#include "llama/identity.hpp"
#include "sampling.hpp"

#include <algorithm>

namespace prfaas::engine::llama_detail {

std::string layout_text(const codec::layout& l) {
  std::string s = "kv " + std::to_string(l.n_full()) + " layers";
  if (l.n_full() > 0) {
    s +=
        " (cell ext " + std::to_string(l.cell_ext) + ", v_trans " + std::to_string(l.v_trans) + ":";
    for (auto& k : l.kv)
      s += " k" + std::to_string(k.k_type) + "/" + std::to_string(k.k_row) + " v" +
           std::to_string(k.v_type) + "/" + std::to_string(k.v_token_bytes());
    s += ")";
  }
  s += ", recurrent " + std::to_string(l.n_linear()) + " layers";
  if (l.n_linear() > 0) {
    s += " (of " + std::to_string(l.rec_n_layer_total) + ":";
    for (auto& r : l.rec)
      s += " r" + std::to_string(r.r_type) + "/" + std::to_string(r.r_row) + " s" +
           std::to_string(r.s_type) + "/" + std::to_string(r.s_row);
    s += ")";
  }
  return s;
}

std::vector<std::byte> llama_engine::read_state(int32_t slot, uint32_t flags) const {
  const size_t n = llama_state_seq_get_size_ext(ctx_.get(), slot, flags);
  std::vector<std::byte> out(n);
  const size_t got = llama_state_seq_get_data_ext(
      ctx_.get(), reinterpret_cast<uint8_t*>(out.data()), n, slot, flags);
  out.resize(got);
  return out;
}

codec::bytes llama_engine::read_state_into(int32_t slot, uint32_t flags,
                                           std::vector<std::byte>& buf) const {
  const size_t n = llama_state_seq_get_size_ext(ctx_.get(), slot, flags);
  if (buf.size() < n) {
    buf = {};              // nothing in it is kept: no copy into the larger one
    buf.resize(n + n / 4); // a prefill's state grows slice by slice: room for the next ones
  }
  const size_t got = llama_state_seq_get_data_ext(
      ctx_.get(), reinterpret_cast<uint8_t*>(buf.data()), n, slot, flags);
  return {buf.data(), got};
}

int32_t llama_engine::claim_slot(std::span<const seq_id> pinned) {
  for (uint32_t i = 0; i < slot_used_.size(); ++i)
    if (!slot_used_[i])
      return static_cast<int32_t>(i);
  sequence* victim = nullptr;
  for (uint32_t i = 0; i < slot_owner_.size(); ++i) {
    const seq_id owner = slot_owner_[i];
    if (!slot_used_[i] || std::find(pinned.begin(), pinned.end(), owner) != pinned.end() ||
        !seqs_.count(owner))
      continue;
    auto& s = seq(owner);
    if (!victim || s.last_used < victim->last_used)
      victim = &s;
  }
  if (!victim)
    return -1;
  const int32_t slot = victim->slot;
  park(*victim);
  return slot;
}

void llama_engine::park(sequence& s) {
  s.parked = read_state(s.slot, 0);
  free_slot(s);
  ++swaps_;
}

void llama_engine::free_slot(sequence& s) {
  if (s.slot < 0)
    return;
  llama_memory_seq_rm(mem(), s.slot, -1, -1);
  slot_used_[static_cast<size_t>(s.slot)] = false;
  slot_owner_[static_cast<size_t>(s.slot)] = 0;
  s.slot = -1;
}

result<void> llama_engine::make_resident(sequence& s, std::span<const seq_id> pinned) {
  s.last_used = ++clock_;
  if (s.slot >= 0)
    return {};
  const int32_t slot = claim_slot(pinned);
  if (slot < 0)
    return make_error("all " + std::to_string(config_.slots) + " slots are in this step");
  const size_t got = llama_state_seq_set_data_ext(
      ctx_.get(), reinterpret_cast<const uint8_t*>(s.parked.data()), s.parked.size(), slot, 0);
  if (got == 0) {
    llama_memory_seq_rm(mem(), slot, -1, -1);
    return make_error("llama.cpp refused a parked state of " + std::to_string(s.parked.size()) +
                      " bytes");
  }
  s.parked = {};
  s.parked.shrink_to_fit();
  s.slot = slot;
  slot_used_[static_cast<size_t>(slot)] = true;
  slot_owner_[static_cast<size_t>(slot)] = s.id;
  ++swaps_;
  return {};
}

const codec::parsed_state& llama_engine::snapshot(const sequence& cs) const {
  auto& s = const_cast<sequence&>(cs); // a cache of what the state is; not the state
  if (snapshot_current(s))
    return s.snap;
  snap_of_.reset();
  codec::bytes blob;
  if (s.slot >= 0) {
    blob = read_state_into(s.slot, 0, snap_buf_);
  } else {
    if (snap_buf_.size() < s.parked.size())
      snap_buf_.resize(s.parked.size());
    std::copy(s.parked.begin(), s.parked.end(), snap_buf_.begin());
    blob = {snap_buf_.data(), s.parked.size()};
  }
  auto p = codec::parse(layout_, blob);
  // The layout was learnt from this context and checked on a probe: a state it cannot
  // parse is a bug, not input. Fail loudly rather than export garbage.
  if (!p)
    throw std::logic_error("llama engine: own state unreadable: " + p.message());
  s.snap = std::move(p).value();
  s.snap_version = s.version;
  snap_of_ = s.id;
  return s.snap;
}

void llama_engine::save_checkpoint(sequence& s, uint32_t at) {
  auto& cp = s.checkpoints[at];
  if (layout_.n_linear() == 0)
    return; // a transformer's "state" at any length is its KV: nothing to keep
  cp.resize(layout_.n_linear());
  auto keep = [&](const codec::parsed_state& st) {
    for (uint32_t l = 0; l < layout_.n_linear(); ++l) {
      cp[l].clear();
      codec::export_rec(layout_, st, l, cp[l]);
    }
  };
  if (snapshot_current(s) && s.snap.rec_pos + 1 == static_cast<int32_t>(at)) {
    keep(s.snap); // the whole state was just read (the slice's KV export): its linear part
    return;
  }
  const codec::bytes blob = read_state_into(
      s.slot, layout_.has_kv ? LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY : 0, rec_scratch_);
  auto p = layout_.has_kv ? codec::parse_recurrent(layout_, blob) : codec::parse(layout_, blob);
  if (!p)
    throw std::logic_error("llama engine: own recurrent state unreadable: " + p.message());
  keep(*p);
}

token llama_engine::sample(sequence& s, const float* logits) {
  auto r = sample_token({logits, info_.vocab_size}, s.rec.sampling, s.rec.sampled++, output_of(s));
  s.logprobs = std::move(r.logprobs);
  return r.id;
}

result<void> llama_engine::load_chunks(sequence& s, std::span<const kv_chunk> chunks,
                                       const checked_chunks& checked, int32_t slot) {
  codec::state_parts parts;
  parts.length = checked.length;
  parts.kv.resize(layout_.n_full());
  parts.rec.resize(layout_.n_linear());
  for (uint32_t l = 0; l < layout_.n_full(); ++l)
    for (size_t i : checked.kv[l]) {
      const auto& h = chunks[i].header;
      parts.kv[l].push_back({chunks[i].payload, h.token_end - h.token_begin});
    }
  for (uint32_t l = 0; l < layout_.n_linear(); ++l)
    parts.rec[l] = chunks[*checked.state[layout_.n_full() + l]].payload;
  if (slot < 0) { // no free slot now: keep it parked until a step needs it
    auto blob = codec::build(layout_, parts);
    if (!blob)
      return blob.err();
    s.parked = std::move(blob).value();
    return {};
  }
  // Into the engine's one load buffer: a state is tens of MB (a 0.8B hybrid's recurrent
  // state alone is 20 MB), and a fresh buffer of that size costs more in page faults
  // than the copy itself (measured: 75-105 ms a state on the 2-vCPU VM, against a few
  // with the buffer reused).
  if (auto ok = codec::build_into(layout_, parts, load_buf_); !ok)
    return ok.err();
  const size_t got = llama_state_seq_set_data_ext(
      ctx_.get(), reinterpret_cast<const uint8_t*>(load_buf_.data()), load_buf_.size(), slot, 0);
  if (got == 0) {
    llama_memory_seq_rm(mem(), slot, -1, -1);
    return make_error("llama.cpp refused the state (" + std::to_string(load_buf_.size()) +
                      " bytes)");
  }
  s.slot = slot;
  slot_used_[static_cast<size_t>(slot)] = true;
  return {};
}

uint64_t llama_engine::expected_payload(uint32_t layer, uint32_t begin, uint32_t end) const {
  return layer < layout_.n_full() ? layout_.kv_payload(layer, end - begin)
                                  : layout_.rec_payload(layer - layout_.n_full());
}

kv_chunk llama_engine::kv_chunk_of(const sequence_base& base, uint32_t layer, uint32_t begin,
                                   uint32_t end) const {
  const auto& s = static_cast<const sequence&>(base);
  std::vector<std::byte> payload;
  codec::export_kv(layout_, snapshot(s), layer, begin, end, payload);
  return make_chunk(kv_header(layer, begin, end, static_cast<uint32_t>(s.rec.tokens.size())),
                    std::move(payload));
}

kv_chunk llama_engine::state_chunk_of(const sequence_base& base, uint32_t layer,
                                      uint32_t at) const {
  const auto& s = static_cast<const sequence&>(base);
  const uint32_t l = layer - layout_.n_full();
  std::vector<std::byte> payload;
  if (at == s.rec.tokens.size())
    codec::export_rec(layout_, snapshot(s), l, payload);
  else
    payload = s.checkpoints.at(at)[l];
  return make_chunk(state_header(layer, at), std::move(payload));
}

bool llama_engine::has_state_at(const sequence_base& base, uint32_t at) const {
  const auto& s = static_cast<const sequence&>(base);
  return at == s.rec.tokens.size() || s.checkpoints.count(at) != 0 ||
         (layout_.n_linear() == 0 && at <= s.rec.tokens.size());
}

result<void> llama_engine::check_identity(std::span<const std::byte> identity) const {
  if (auto why = llama_detail::compare_identity(identity, info_.identity); !why.empty())
    return make_error(why);
  return {};
}

} // namespace prfaas::engine::llama_detail
