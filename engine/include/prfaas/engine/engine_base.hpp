#pragma once

#include "prfaas/engine/engine.hpp"
#include "prfaas/engine/sequence_record.hpp"

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

namespace prfaas::engine {

/// What every engine keeps per sequence; each engine derives its own sequence from it.
struct sequence_base {
  virtual ~sequence_base() = default;
  sequence_record rec; ///< rec.tokens.size() is the sequence's length
  /// Of the token sampled last (rec.pending), when rec.sampling asked for them.
  std::optional<sampled_logprobs> logprobs;
};

/// The part of the engine interface that does not depend on how an engine computes:
/// the sequence table, the argument checks with their error texts, the validation of
/// imports and reused prefixes, and the layer loops of the exports. An engine fills
/// `info_`, stores only its own sequence type in `seqs_`, and supplies payload sizes
/// and single chunks through the hooks below.
class engine_base : public engine {
public:
  const model_info& info() const final { return info_; }

  result<std::vector<kv_chunk>> export_sequence(seq_id id) const final;
  result<std::vector<kv_chunk>> export_kv(seq_id id, uint32_t begin, uint32_t end) const final;
  result<std::vector<kv_chunk>> export_checkpoint(seq_id id, uint32_t at) const final;
  std::optional<sampled_logprobs> last_logprobs(seq_id id) const final;
  void release(seq_id id) override;
  bool contains(seq_id id) const final { return seqs_.count(id) != 0; }
  uint32_t length(seq_id id) const final;

protected:
  /// "sequence <id>", the name every error message uses.
  static std::string seq_str(seq_id id);

  /// Payload bytes of a chunk of `layer` covering [begin, end) (linear: the state size).
  virtual uint64_t expected_payload(uint32_t layer, uint32_t begin, uint32_t end) const = 0;
  /// Full-layer KV of `s` for tokens [begin, end) ⊆ [0, length).
  virtual kv_chunk kv_chunk_of(const sequence_base& s, uint32_t layer, uint32_t begin,
                               uint32_t end) const = 0;
  /// Linear state of `layer` at `at` tokens; called only where has_state_at(s, at).
  virtual kv_chunk state_chunk_of(const sequence_base& s, uint32_t layer, uint32_t at) const = 0;
  /// Whether export_checkpoint(·, at) can serve the linear states of `s` at `at` tokens.
  virtual bool has_state_at(const sequence_base& s, uint32_t at) const = 0;

  /// Header of a full-layer chunk: tokens [begin, end) of a sequence of `total` tokens.
  chunk_header kv_header(uint32_t layer, uint32_t begin, uint32_t end, uint32_t total) const;
  /// Header of a linear-state chunk: the state after `at` tokens.
  chunk_header state_header(uint32_t layer, uint32_t at) const;

  /// prefill() checks, part 1: id free, prompt length in [1, 2^24], token ids in vocab.
  result<void> check_prompt(const prefill_request& req, const std::string& who) const;
  /// prefill() checks, part 2: something left to compute, and the reuse chunks tile
  /// exactly [0, reuse_tokens) (validated like an import, without meta chunk).
  result<void> check_reuse(const prefill_request& req, const std::string& who) const;
  /// Both parts, and a sampling temperature that is a number not below 0 (for the
  /// engines that sample).
  result<void> check_prefill(const prefill_request& req, const std::string& who) const;
  /// decode_step() checks: every id known, none twice.
  result<void> check_batch(std::span<const seq_id> batch) const;
  /// import_sequence() checks: id free, the meta chunk's model identity (check_identity,
  /// before anything else, so that a state from another model, quantisation or format
  /// version is called that), chunks valid and complete, meta record valid and
  /// matching the covered length (> 0). Returns the record of the meta chunk.
  result<sequence_record> check_import(seq_id id, std::span<const kv_chunk> chunks) const;
  /// Whether an exported identity (empty: the exporter had none) may be imported here;
  /// the error says which part differs. By default: equal to info_.identity.
  virtual result<void> check_identity(std::span<const std::byte> identity) const;
  /// The sampling output of `s` for its next draw, recorded in the sequence.
  static std::span<const token> output_of(const sequence_base& s);

  model_info info_;
  /// Every entry was created by the derived engine, so it is that engine's sequence type.
  std::unordered_map<seq_id, std::unique_ptr<sequence_base>> seqs_;
};

} // namespace prfaas::engine
