#pragma once

// llama.cpp's per-sequence state (llama_state_seq_get_data_ext) in prfaas's chunk
// terms, and back. Plain C++ over bytes: no llama.h, so it is unit-tested and fuzzed
// on its own.
//
// The state of one sequence, as llama.cpp v0.5.0 writes it (llama-context.cpp,
// llama-kv-cache.cpp, llama-memory-recurrent.cpp; all little-endian):
//
//   u32 magic, i32 seq_id (the sequence it was read from; ignored when loading)
//   attention KV (absent in recurrent-only models)
//     u32 n_stream, then per stream u32 cell_count and, when it is not 0:
//       per cell: i32 pos, u32 n_seq_id (1), [cell extension], i32 seq_id
//       u32 v_trans, u32 n_layer
//       per layer: i32 k_type, u64 k_row, k_row bytes per cell
//       per layer with V: i32 v_type, u64 v_row, v_row bytes per cell         (v_trans 0)
//                     or i32 v_type, u32 v_el, u32 n_embd_v, for each of the
//                        n_embd_v dimensions v_el bytes per cell             (v_trans 1)
//   recurrent state (absent in attention-only models; PARTIAL_ONLY gives it alone)
//     u32 cell_count (1), i32 pos, u32 n_seq_id (0), u32 s_trans (0), u32 n_layer_total
//     per recurrent layer: i32 r_type, u64 r_row, r_row bytes
//     per recurrent layer: i32 s_type, u64 s_row, s_row bytes
//
// prfaas sees a model as layers in that order: one *full* layer per attention-cache
// layer, then one *linear* layer per recurrent layer. A full layer's chunk for tokens
// [b, e) carries, for those positions in order: (layer 0 only) the cell extensions,
// the K rows, then the V rows (v_trans 1: per dimension, the elements of those
// positions). A linear layer's chunk carries its r row then its s row.
//
// llama.cpp does not promise this format; it is learned and checked at start-up
// (discover: parse a probe state and rebuild it byte for byte) and is part of the
// model identity that every exported state carries (identity.hpp), so a state from
// another llama.cpp is refused before it reaches a context.

#include "prfaas/engine/result.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace prfaas::engine::llama_codec {

using bytes = std::span<const std::byte>;

/// The shape of one model's sequence state in one context configuration.
struct layout {
  struct kv_layer {
    int32_t k_type = 0;
    uint64_t k_row = 0; ///< K bytes per token
    bool has_v = false;
    int32_t v_type = 0;
    uint64_t v_row = 0;  ///< V bytes per token (v_trans 0)
    uint32_t v_el = 0;   ///< element size (v_trans 1)
    uint32_t v_dims = 0; ///< n_embd_v (v_trans 1)
    uint64_t v_token_bytes() const {
      return has_v ? (v_row != 0 ? v_row : uint64_t{v_el} * v_dims) : 0;
    }
  };
  struct rec_layer {
    int32_t r_type = 0;
    uint64_t r_row = 0;
    int32_t s_type = 0;
    uint64_t s_row = 0;
  };

  uint32_t magic = 0; ///< the state's first word, as llama.cpp writes it
  bool has_kv = false;
  uint32_t n_stream = 1;
  uint32_t cell_ext = 0; ///< bytes of each cell's extension (M-RoPE position, token); 0 = none
  bool v_trans = false;
  std::vector<kv_layer> kv;

  bool has_rec = false;
  uint32_t rec_n_layer_total = 0; ///< the model's layer count, as the section writes it
  std::vector<rec_layer> rec;

  uint32_t n_full() const { return static_cast<uint32_t>(kv.size()); }
  uint32_t n_linear() const { return static_cast<uint32_t>(rec.size()); }
  /// Payload bytes of full layer `l`'s chunk for `tokens` positions.
  uint64_t kv_payload(uint32_t l, uint64_t tokens) const;
  /// Payload bytes of linear layer `l`'s chunk.
  uint64_t rec_payload(uint32_t l) const;
  /// KV bytes of one token over every full layer (cell extension included).
  uint64_t kv_bytes_per_token() const;
  /// Recurrent-state bytes of one sequence over every linear layer.
  uint64_t rec_bytes() const;
  /// Bytes of a whole sequence state of `n` tokens, headers included (at least what
  /// llama_state_seq_get_size_ext gives for it).
  uint64_t state_bytes(uint32_t n) const;
};

/// One sequence's state, parsed: pointers into the blob it was parsed from (which
/// must outlive it).
struct parsed_state {
  uint32_t length = 0;               ///< tokens: KV positions [0, length) (or rec_pos + 1)
  std::vector<uint32_t> cell_of_pos; ///< KV: the cell holding each position
  uint32_t n_cells = 0;
  const std::byte* ext = nullptr;     ///< KV: cell extensions, in cell order (cell_ext each)
  std::vector<const std::byte*> k, v; ///< per full layer: rows (or the transposed block)
  int32_t rec_pos = -1;               ///< recurrent: the position the state is after
  std::vector<const std::byte*> r, s; ///< per linear layer
};

/// Learns the layout from a probe: `full` is the state of a sequence with at least two
/// tokens (flags 0); `partial` the same with PARTIAL_ONLY (hybrid models; empty
/// otherwise). Then rebuilds the probe from its parts and requires the same bytes.
result<layout> discover(bytes full, bytes partial, bool hybrid, bool recurrent_only);

/// Parses a whole sequence state (flags 0) of `lay`. Every size is checked: a blob
/// that does not match the layout is an error, never a wild read.
result<parsed_state> parse(const layout& lay, bytes blob);
/// Parses a recurrent-state blob (PARTIAL_ONLY of a hybrid model, or the whole state of
/// a recurrent-only one): fills rec_pos, r and s.
result<parsed_state> parse_recurrent(const layout& lay, bytes blob);

/// Appends full layer `l`'s chunk payload for positions [b, e) of `st` to `out`.
void export_kv(const layout& lay, const parsed_state& st, uint32_t l, uint32_t b, uint32_t e,
               std::vector<std::byte>& out);
/// Appends linear layer `l`'s chunk payload of `st` to `out`.
void export_rec(const layout& lay, const parsed_state& st, uint32_t l, std::vector<std::byte>& out);

/// The pieces of a state to rebuild: per full layer, chunk payloads tiling [0, length)
/// in order, with their token counts; per linear layer, its payload.
struct state_parts {
  uint32_t length = 0;
  struct piece {
    bytes payload;
    uint32_t tokens = 0;
  };
  std::vector<std::vector<piece>> kv; ///< [full layer][chunk]
  std::vector<bytes> rec;             ///< [linear layer]
};

/// A sequence state llama_state_seq_set_data_ext(flags 0) accepts, from validated
/// parts (sizes are checked again; an error names the layer), into `out`: its contents
/// replaced, its memory reused. One copy of each byte.
result<void> build_into(const layout& lay, const state_parts& parts, std::vector<std::byte>& out);
/// As build_into, into a new buffer.
inline result<std::vector<std::byte>> build(const layout& lay, const state_parts& parts) {
  std::vector<std::byte> out;
  if (auto ok = build_into(lay, parts, out); !ok)
    return ok.err();
  return out;
}

} // namespace prfaas::engine::llama_codec
