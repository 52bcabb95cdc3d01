#pragma once

// Internal to the llama engine: the engine class, shared by llama_engine.cpp (start-up,
// prefill, decode, import) and llama_sequences.cpp (slots and parking, state snapshots,
// checkpoints, exports). See llama_engine.cpp for what it does and why.

#include "prfaas/engine/chunk_check.hpp"
#include "prfaas/engine/engine_base.hpp"
#include "prfaas/engine/llama_engine.hpp"

#include "llama/cpu_gate.hpp"
#include "llama/model_store.hpp"
#include "llama/state_codec.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <optional>

#include <llama.h>

namespace prfaas::engine::llama_detail {

namespace codec = llama_codec;

/// The layout as the model identity describes it.
std::string layout_text(const codec::layout& l);

struct context_deleter {
  void operator()(llama_context* c) const { llama_free(c); }
};

class llama_engine final : public engine_base {
public:
  static result<std::unique_ptr<engine>> create(const llama_config& c);

  result<prefill_result> prefill(const prefill_request& req, const chunk_sink& sink) override;
  std::vector<result<prefill_result>> prefill_batch(std::span<const prefill_request> reqs,
                                                    std::span<const chunk_sink> sinks,
                                                    const prefill_done& done = {}) override;
  result<std::vector<token>> decode_step(std::span<const seq_id> batch) override;
  result<void> import_sequence(seq_id id, std::span<const kv_chunk> chunks) override;
  void release(seq_id id) override;

  double prefill_seconds(uint64_t tokens) const override;
  double decode_seconds(uint32_t batch, uint64_t context) const override;
  double kv_bytes(uint64_t tokens) const override;
  std::vector<engine_counter> counters() const override;

private:
  struct sequence : sequence_base {
    seq_id id = 0;
    int32_t slot = -1;             ///< llama seq id while resident
    std::vector<std::byte> parked; ///< its whole state while not resident
    uint64_t last_used = 0;        ///< for the choice of whom to park
    /// Linear-layer payloads (state_codec) at recorded lengths.
    std::map<uint32_t, std::vector<std::vector<std::byte>>> checkpoints;
    /// A parsed copy of the state (in the engine's snapshot buffer), valid while
    /// `snap_version == version` and the buffer still holds this sequence's state.
    uint64_t version = 0;
    uint64_t snap_version = UINT64_MAX;
    codec::parsed_state snap;
  };

  llama_engine(const llama_config& c, std::shared_ptr<loaded_model> m)
      : config_(c), model_(std::move(m)) {}

public:
  ~llama_engine() override {
    if (batch_capacity_ != 0)
      llama_batch_free(batch_);
    ctx_.reset(); // before the threads it computes on
    if (threadpool_)
      ggml_threadpool_free(threadpool_);
  }

private:
  result<void> init();
  /// Fills info_ from the model and the discovered state layout (end of init()).
  void describe();
  llama_memory_t mem() const { return llama_get_memory(ctx_.get()); }
  sequence& seq(seq_id id) const { return static_cast<sequence&>(*seqs_.at(id)); }

  /// The state of llama seq `slot` (flags 0 or PARTIAL_ONLY).
  std::vector<std::byte> read_state(int32_t slot, uint32_t flags) const;
  /// The same into `buf`, reusing its memory: it only grows, so a buffer read again
  /// and again (a prefill's snapshot per slice, its checkpoints) is neither zeroed nor
  /// faulted in again — fresh pages cost more here than the copy. The state's bytes.
  codec::bytes read_state_into(int32_t slot, uint32_t flags, std::vector<std::byte>& buf) const;
  /// A free slot, parking the least recently used sequence not in `pinned` if needed;
  /// -1 when every slot is pinned.
  int32_t claim_slot(std::span<const seq_id> pinned);
  result<void> make_resident(sequence& s, std::span<const seq_id> pinned);
  void park(sequence& s);
  void free_slot(sequence& s);
  /// The parsed snapshot of `s` (refreshed when the sequence changed since, or the
  /// buffer was taken by another sequence's). Valid until the next snapshot.
  const codec::parsed_state& snapshot(const sequence& s) const;
  bool snapshot_current(const sequence& s) const {
    return snap_of_ == s.id && s.snap_version == s.version;
  }
  result<void> decode_slice(int32_t slot, std::span<const token> tokens, uint32_t pos0,
                            bool logits);
  /// llama_decode(batch_), in turn, on the process's compute thread (cpu_gate).
  int32_t run_batch();
  /// Loads validated chunks (state_codec build) into `s`'s slot.
  result<void> load_chunks(sequence& s, std::span<const kv_chunk> chunks,
                           const checked_chunks& checked, int32_t slot);
  /// The linear layers' state of `s` at `at` (its current length) kept for prefix reuse;
  /// read from the snapshot when that is current, else on its own (PARTIAL_ONLY).
  void save_checkpoint(sequence& s, uint32_t at);
  /// Puts `s` into `slot`: the reused prefix's chunks loaded (`req.reuse_tokens` > 0),
  /// or the slot taken empty.
  result<void> place(sequence& s, const prefill_request& req, int32_t slot);
  /// One prefill of a prefill_batch call while it runs.
  struct prefill_item {
    const prefill_request* req = nullptr;
    const chunk_sink* sink = nullptr;
    std::unique_ptr<sequence> s; ///< placed in a slot, with its reused prefix
    uint32_t pos = 0;            ///< the prompt is computed up to here
    std::string error;           ///< why it failed (then nothing more is done for it)
    std::optional<prefill_result> done;
    size_t index = 0;                      ///< its request's place in the prefill_batch call
    const prefill_done* on_done = nullptr; ///< told when it ends (may be empty)
    std::chrono::steady_clock::time_point started; ///< its group's start
  };
  /// Checks the item's request and places it in a slot (with its reused prefix), or
  /// says why not in `it.error`. `earlier`: the items of the same call before it.
  void start_prefill(prefill_item& it, std::span<const prefill_item> earlier);
  /// Computes every placed item's prompt past its reused prefix, in rounds of one
  /// llama_decode each: a round takes the next slice of each unfinished item in turn, up
  /// to `config_.batch` tokens in all, and a slice ends at its item's next checkpoint or
  /// at its prompt's end. After a round, each slice's KV goes to its item's sink,
  /// checkpoints are kept, and a finished item samples its first token, sends its end
  /// state and is reported to its `on_done` (so that its transfer closes while the
  /// others compute on).
  void compute_prompts(std::span<prefill_item> items);
  /// The slices of one round into batch_ (a slice per unfinished item, in turn).
  struct slice {
    prefill_item* it;
    uint32_t end;
    int32_t logits_at; ///< its batch index when the slice ends the prompt, else -1
  };
  std::vector<slice> fill_round(std::span<prefill_item> items);
  /// The linear layers' state at the prompt's end and the sequence record, to `sink`.
  void export_end_state(const sequence& s, uint32_t n, const chunk_sink& sink) const;
  token sample(sequence& s, const float* logits);

  uint64_t expected_payload(uint32_t layer, uint32_t begin, uint32_t end) const override;
  kv_chunk kv_chunk_of(const sequence_base& s, uint32_t layer, uint32_t begin,
                       uint32_t end) const override;
  kv_chunk state_chunk_of(const sequence_base& s, uint32_t layer, uint32_t at) const override;
  bool has_state_at(const sequence_base& s, uint32_t at) const override;
  result<void> check_identity(std::span<const std::byte> identity) const override;

  llama_config config_;
  std::shared_ptr<loaded_model> model_;
  std::unique_ptr<llama_context, context_deleter> ctx_;
  /// The context's compute threads, kept across llama_decode calls (without one, ggml
  /// starts and joins its threads for every graph: a decode step each token).
  ggml_threadpool* threadpool_ = nullptr;
  const llama_vocab* vocab_ = nullptr;
  codec::layout layout_;
  std::vector<seq_id> slot_owner_; ///< by slot: the sequence in it (when slot_used_)
  std::vector<bool> slot_used_;
  llama_batch batch_{};
  uint32_t batch_capacity_ = 0;
  uint64_t clock_ = 0;
  uint64_t prompt_tokens_ = 0; ///< computed by prefills (ours; llama.cpp's own below)
  uint64_t swaps_ = 0;
  uint64_t prefill_decodes_ = 0;       ///< llama_decode calls of prefills
  std::vector<std::byte> rec_scratch_; ///< save_checkpoint's read, reused (read_state_into)
  /// The one snapshot buffer, reused by every sequence's snapshot (read_state_into): a
  /// prefill reads its whole state after every slice, and fresh buffers for those reads
  /// cost more in page faults than the reads themselves. It keeps the size of the
  /// largest state read (+25%): at most one sequence's state at the context's length,
  /// i.e. bounded by the KV cache llama.cpp allocates for the context anyway.
  mutable std::vector<std::byte> snap_buf_;
  std::vector<std::byte> load_buf_;       ///< the state an import builds, reused (load_chunks)
  mutable std::optional<seq_id> snap_of_; ///< whose state snap_buf_ holds
  double cpu_wait_s_ = 0; ///< this engine's graphs queued on the process's compute thread
  /// Measured pace (EWMA): prefill tokens per second, seconds per decode step and token.
  double prefill_tps_ = 0, decode_s_per_token_ = 0;
  double flops_per_token_ = 0;
};

} // namespace prfaas::engine::llama_detail
