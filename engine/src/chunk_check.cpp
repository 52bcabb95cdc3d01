#include "prfaas/engine/chunk_check.hpp"

#include <algorithm>

namespace prfaas::engine {

namespace {

std::string range_str(uint32_t b, uint32_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + ")";
}

/// Per-chunk checks that need no knowledge of the other chunks.
result<void> check_one(const model_info& info, const kv_chunk& c, size_t i) {
  const auto& h = c.header;
  auto label = [&] { return chunk_label(i, h); }; // built only for an error
  if (h.version != chunk_header::current_version)
    return make_error(label() + ": unsupported format version " + std::to_string(h.version));
  if (h.model_fingerprint != info.fingerprint)
    return make_error(label() + ": model mismatch (chunk fingerprint " +
                      std::to_string(h.model_fingerprint) + ", engine " + info.model + " " +
                      std::to_string(info.fingerprint) + ")");
  if (h.n_layers != info.n_layers())
    return make_error(label() + ": layer count mismatch (chunk " + std::to_string(h.n_layers) +
                      ", model " + std::to_string(info.n_layers()) + ")");
  if (h.payload_bytes != c.payload.size())
    return make_error(label() + ": payload length " + std::to_string(c.payload.size()) +
                      " does not match header " + std::to_string(h.payload_bytes));
  if (h.token_begin > h.token_end || h.token_end > h.total_tokens)
    return make_error(label() + ": invalid token range " + range_str(h.token_begin, h.token_end) +
                      " of " + std::to_string(h.total_tokens));
  if (h.kind == layer_kind::meta) {
    if (h.layer != info.n_layers())
      return make_error(label() + ": meta chunk with layer index " + std::to_string(h.layer));
  } else {
    if (h.layer >= info.n_layers())
      return make_error(label() + ": layer index out of range");
    if (info.layers[h.layer] != h.kind)
      return make_error(label() + ": layer kind mismatch (chunk " + to_string(h.kind) + ", model " +
                        to_string(info.layers[h.layer]) + ")");
  }
  if (checksum(c.payload) != h.payload_xxh3)
    return make_error(label() + ": checksum mismatch (payload corrupted)");
  return {};
}

} // namespace

namespace {

/// Pass 1: each chunk on its own, and where the meta chunk is (at most one, and only
/// when `require_meta`).
result<void> find_meta(const model_info& info, std::span<const kv_chunk> chunks, bool require_meta,
                       checked_chunks& out) {
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (auto r = check_one(info, chunks[i], i); !r)
      return r.err();
    const auto& h = chunks[i].header;
    if (h.kind != layer_kind::meta)
      continue;
    if (!require_meta)
      return make_error(chunk_label(i, h) + ": unexpected meta chunk in a prefix");
    if (out.meta)
      return make_error(chunk_label(i, h) + ": duplicate meta chunk (first is chunk " +
                        std::to_string(*out.meta) + ")");
    out.meta = i;
  }
  if (require_meta && !out.meta)
    return make_error("kv chunks: no meta chunk (sequence record) in " +
                      std::to_string(chunks.size()) + " chunks");
  return {};
}

/// Pass 2: every state and KV chunk indexed by layer, within the length, with the
/// payload size its range implies.
result<void> index_layers(std::span<const kv_chunk> chunks, const payload_size_fn& expected_payload,
                          checked_chunks& out) {
  const uint32_t length = out.length;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto& h = chunks[i].header;
    auto label = [&] { return chunk_label(i, h); };
    if (h.kind == layer_kind::linear) {
      if (h.token_begin != 0 || h.token_end != length)
        return make_error(label() + ": linear state at length " + std::to_string(h.token_end) +
                          " but " + std::to_string(length) +
                          " is required (state is reusable only at the exact length saved)");
      if (out.state[h.layer])
        return make_error(label() + ": duplicate state (first is chunk " +
                          std::to_string(*out.state[h.layer]) + ")");
      out.state[h.layer] = i;
    } else if (h.kind == layer_kind::full) {
      if (h.token_end > length)
        return make_error(label() + ": KV range " + range_str(h.token_begin, h.token_end) +
                          " extends past length " + std::to_string(length));
      out.kv[h.layer].push_back(i);
    } else {
      continue;
    }
    const uint64_t want = expected_payload(h.layer, h.token_begin, h.token_end);
    if (h.payload_bytes != want)
      return make_error(label() + ": payload length " + std::to_string(h.payload_bytes) + " but " +
                        std::to_string(want) + " expected for " +
                        range_str(h.token_begin, h.token_end));
  }
  return {};
}

/// Pass 3: every linear layer has its state, every full layer's KV covers [0, length)
/// exactly once (its chunks sorted by position).
result<void> check_coverage(const model_info& info, std::span<const kv_chunk> chunks,
                            checked_chunks& out) {
  const uint32_t length = out.length;
  for (uint32_t layer = 0; layer < info.n_layers(); ++layer) {
    if (info.layers[layer] == layer_kind::linear) {
      if (!out.state[layer])
        return make_error("kv chunks: missing linear state for layer " + std::to_string(layer) +
                          " at length " + std::to_string(length));
      continue;
    }
    auto& idx = out.kv[layer];
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      return chunks[a].header.token_begin < chunks[b].header.token_begin;
    });
    uint32_t covered = 0;
    for (size_t i : idx) {
      const auto& h = chunks[i].header;
      if (h.token_begin != covered)
        return make_error(chunk_label(i, h) + ": KV range " +
                          range_str(h.token_begin, h.token_end) +
                          (h.token_begin < covered ? " overlaps" : " leaves a gap after") +
                          " tokens [0, " + std::to_string(covered) + ")");
      covered = h.token_end;
    }
    if (covered != length)
      return make_error("kv chunks: layer " + std::to_string(layer) + " KV covers [0, " +
                        std::to_string(covered) + ") but [0, " + std::to_string(length) +
                        ") is required");
  }
  return {};
}

} // namespace

result<checked_chunks> check_chunks(const model_info& info, std::span<const kv_chunk> chunks,
                                    uint32_t length, bool require_meta,
                                    const payload_size_fn& expected_payload) {
  checked_chunks out;
  out.kv.resize(info.n_layers());
  out.state.resize(info.n_layers());
  if (auto r = find_meta(info, chunks, require_meta, out); !r)
    return r.err();
  out.length = out.meta ? chunks[*out.meta].header.token_end : length;
  if (auto r = index_layers(chunks, expected_payload, out); !r)
    return r.err();
  if (auto r = check_coverage(info, chunks, out); !r)
    return r.err();
  return out;
}

} // namespace prfaas::engine
