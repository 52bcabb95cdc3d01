#pragma once

#include "prfaas/engine/clock.hpp"
#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/engine/result.hpp"
#include "prfaas/engine/types.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <span>
#include <vector>

namespace prfaas::engine {

/// Receives chunks while a prefill runs: each layer's chunk is handed over as soon as
/// that layer has finished (layer 0 first), then the meta chunk. Lets a prefill
/// worker stream KV layer by layer while later layers still compute. Chunks for a
/// reused prefix are not re-emitted: a full layer's chunk covers only the computed
/// range [reuse_tokens, prompt length).
using chunk_sink = std::function<void(kv_chunk&&)>;

/// One prefill call.
struct prefill_request {
  seq_id id = 0;                 ///< new sequence id; must not exist in this instance
  std::span<const token> prompt; ///< the whole prompt, including any reused prefix
  sampling_params sampling;
  /// Reused prefix state: full-layer KV tiling [0, reuse_tokens) (any split, e.g. one
  /// chunk per cached block) and every linear layer's state at exactly reuse_tokens.
  /// Validated like an import; reuse_tokens must be < prompt.size().
  std::span<const kv_chunk> reuse;
  uint32_t reuse_tokens = 0;
  /// Keep linear-state checkpoints at every multiple of this many tokens (0 = none),
  /// so export_checkpoint() can feed the prefix cache pool afterwards.
  uint32_t checkpoint_interval = 0;
};

/// Outcome of a prefill.
struct prefill_result {
  token first_token = 0;        ///< sampled from the last prompt position; pending for decode
  uint32_t computed_tokens = 0; ///< prompt tokens actually computed (prompt - reuse)
  nanos modeled_time{0};        ///< the cost model's T_prefill(computed_tokens)
  /// The first token's log-probabilities, when the request asked for them.
  std::optional<sampled_logprobs> first_logprobs;
};

/// Told, while prefill_batch runs, that request `index` has ended (its every chunk has
/// gone to its sink, or it failed), with the result prefill_batch will return for it.
/// A caller can then close that request's transfer while the others still compute.
using prefill_done = std::function<void(size_t index, const result<prefill_result>& r)>;

/// A named figure an engine keeps about its own work (e.g. the tokens llama.cpp
/// evaluated), for metrics and tests.
struct engine_counter {
  std::string name; ///< snake_case, e.g. "llama_n_p_eval"
  std::string help;
  double value = 0;
};

/// The engine interface the prefill and decode workers drive. One instance owns
/// its sequences; instances share nothing. Not thread-safe: one caller at a time.
/// Every input that may come from another node (chunks, reuse) is validated and a
/// bad one returns an error — never undefined behaviour, never a partial import.
class engine {
public:
  virtual ~engine() = default;

  virtual const model_info& info() const = 0;

  /// Prefill `req.prompt` into a new sequence `req.id` (optionally starting from a
  /// reused prefix), streaming chunks into `sink` (may be empty).
  virtual result<prefill_result> prefill(const prefill_request& req, const chunk_sink& sink) = 0;
  /// Several prefills at once, each as `prefill` does it (its own sequence id, reuse
  /// and sink `sinks[i]`): an engine that gains from it computes them together
  /// (model_info::prefill_batch_tokens says how much), the others one after the other.
  /// One result per request, in order; one request's error leaves the others' intact.
  /// `done` (may be empty) hears of each request as soon as it ends, once, before
  /// prefill_batch returns.
  virtual std::vector<result<prefill_result>> prefill_batch(std::span<const prefill_request> reqs,
                                                            std::span<const chunk_sink> sinks,
                                                            const prefill_done& done = {}) {
    std::vector<result<prefill_result>> out;
    out.reserve(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      out.push_back(prefill(reqs[i], i < sinks.size() ? sinks[i] : chunk_sink{}));
      if (done)
        done(i, out.back());
    }
    return out;
  }

  /// One decode step for each sequence in `batch` (distinct ids): feeds its pending
  /// token, samples the next one. Returns the sampled tokens, in batch order.
  virtual result<std::vector<token>> decode_step(std::span<const seq_id> batch) = 0;

  /// The whole sequence for transfer: for every layer in order, full-layer KV
  /// [0, length) or linear state at length, then the meta chunk.
  virtual result<std::vector<kv_chunk>> export_sequence(seq_id id) const = 0;
  /// Full-layer KV of tokens [begin, end), one chunk per full layer (a cache block).
  virtual result<std::vector<kv_chunk>> export_kv(seq_id id, uint32_t begin,
                                                  uint32_t end) const = 0;
  /// Linear state at exactly `at` tokens, one chunk per linear layer. Available at
  /// checkpoints recorded during prefill and at the current length.
  virtual result<std::vector<kv_chunk>> export_checkpoint(seq_id id, uint32_t at) const = 0;

  /// Create sequence `id` from an export (any chunk order; full-layer KV may be
  /// split into several chunks). All-or-nothing.
  virtual result<void> import_sequence(seq_id id, std::span<const kv_chunk> chunks) = 0;

  /// Log-probabilities of the token the last decode_step sampled for `id`, when its
  /// sampling asked for them (nullopt otherwise, or for an unknown id).
  virtual std::optional<sampled_logprobs> last_logprobs(seq_id id) const = 0;

  /// Figures of the engine's own work; none by default.
  virtual std::vector<engine_counter> counters() const { return {}; }

  /// Drop a sequence; unknown ids are ignored.
  virtual void release(seq_id id) = 0;
  virtual bool contains(seq_id id) const = 0;
  /// Tokens held (KV length) of a sequence; 0 if unknown.
  virtual uint32_t length(seq_id id) const = 0;

  /// Cost model for the scheduler and planner.
  /// T_prefill(l): seconds to prefill l uncached tokens on one instance.
  virtual double prefill_seconds(uint64_t tokens) const = 0;
  /// T_decode: seconds for one decode step of `batch` sequences of mean context `context`.
  virtual double decode_seconds(uint32_t batch, uint64_t context) const = 0;
  /// S_kv(l): bytes of KV + linear state for a sequence of l tokens (model scale,
  /// i.e. before any buffer scaling of the profile engine).
  virtual double kv_bytes(uint64_t tokens) const = 0;
  /// Φ_kv(l) in Gbit/s (1e9 bit/s): S_kv(l) * 8 / T_prefill(l).
  double kv_throughput_gbps(uint64_t tokens) const {
    return kv_bytes(tokens) * 8.0 / prefill_seconds(tokens) / 1e9;
  }
};

} // namespace prfaas::engine
