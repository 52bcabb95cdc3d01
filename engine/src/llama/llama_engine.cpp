// The llama.cpp engine (llama_engine.hpp): one llama_context per instance, prfaas
// sequences as llama.cpp sequence ids ("slots"), continuous batching (one llama_decode
// for a decode step of the whole batch), prefill in n_batch slices — several prompts'
// slices in one llama_decode when they are prefilled together (prefill_batch), as
// llama-server batches its slots' prompts — and the sequence state cut into prfaas chunks
// by state_codec.hpp.
//
// What llama.cpp's API does not allow, and what this engine does instead:
//  * Layer-by-layer streaming while a prefill runs: llama_decode computes every layer
//    of a slice before it returns, and the state API reads a whole sequence. So the
//    KV streams slice by slice: after each n_batch slice, every attention layer's KV of
//    that slice's tokens goes to the sink (the transfer overlaps the later slices); the
//    recurrent state, which exists only at the last processed position, goes last.
//  * Recurrent checkpoints at block boundaries: the state is readable only after a
//    llama_decode, so slices also end at every multiple of checkpoint_interval, and the
//    recurrent state (PARTIAL_ONLY) is saved there. A prompt whose prefix is cached
//    still computes from the last checkpoint at or before its last token.
//  * Reading a token range of the KV: only the whole sequence can be read, so exports
//    parse one snapshot of it per change of the sequence and cut ranges out of that.
//  * More sequences than slots: a llama_context holds at most n_seq_max sequences, so
//    the others are parked as their serialized state and swapped in when a decode step
//    needs them (the least recently used one not in the step is parked in its place).
//
// Cores: every llama_decode of the process runs on one thread, in turn (cpu_gate.hpp).

#include "llama/engine_impl.hpp"

#include "llama/identity.hpp"

#include <chrono>
#include <cmath>

#include <ggml-cpu.h>

#ifndef PRFAAS_LLAMA_RELEASE
#define PRFAAS_LLAMA_RELEASE "unknown"
#endif

namespace prfaas::engine {

const char* llama_release() {
  return PRFAAS_LLAMA_RELEASE;
}

std::string extra_buffer_types_refusal(const std::string& architecture) {
  // Its graph has an operation no backend of the extra buffer types' scheduler takes:
  // ggml-backend.cpp's GGML_ASSERT(*cur_backend_id != -1) kills the process (seen with
  // the AMX type, F16 weights).
  if (architecture == "kimi-linear")
    return "llama.cpp " + std::string{llama_release()} +
           " aborts on kimi-linear models with extra buffer types (a scheduler assert)";
  return {};
}

namespace llama_detail {

result<std::unique_ptr<engine>> llama_engine::create(const llama_config& c) {
  auto m = llama_detail::load_model(c.gguf, false, c.extra_buffer_types);
  if (!m)
    return m.err();
  if (!(*m)->facts.unsupported.empty())
    return make_error(c.gguf + ": architecture " + (*m)->facts.architecture +
                      " is not supported: " + (*m)->facts.unsupported);
  if (c.extra_buffer_types)
    if (auto why = extra_buffer_types_refusal((*m)->facts.architecture); !why.empty())
      return make_error(c.gguf + ": extra buffer types: " + why);
  std::unique_ptr<llama_engine> e(new llama_engine(c, std::move(m).value()));
  if (auto r = e->init(); !r)
    return r.err();
  return std::unique_ptr<engine>(std::move(e));
}

result<void> llama_engine::init() {
  const auto& f = model_->facts;
  if (config_.context == 0)
    config_.context = f.n_ctx_train;
  if (config_.context > f.n_ctx_train)
    return make_error(config_.gguf + ": a context of " + std::to_string(config_.context) +
                      " tokens is larger than the model's " + std::to_string(f.n_ctx_train));
  if (config_.slots == 0 || config_.slots > 256)
    return make_error("llama engine: slots must be between 1 and 256");
  if (config_.batch == 0 || config_.ubatch == 0 || config_.ubatch > config_.batch)
    return make_error("llama engine: need 0 < ubatch <= batch");
  if (config_.threads == 0)
    return make_error("llama engine: threads must be at least 1");
  auto cp = llama_context_default_params();
  // Each sequence its own stream of `context` cells: a sequence's state reads and
  // loads on its own, and sequences never compete for cells.
  cp.n_ctx = config_.context * config_.slots;
  cp.n_batch = config_.batch;
  cp.n_ubatch = config_.ubatch;
  cp.n_seq_max = config_.slots;
  cp.kv_unified = false;
  // ggml's CPU flash attention takes other paths for other batch shapes (tiles for long
  // query runs, split KV for one query over a long cache): off, a sequence computes the
  // same bits in any batch (docs/llama.md, "Batch invariance").
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.n_threads = static_cast<int32_t>(config_.threads);
  cp.n_threads_batch = static_cast<int32_t>(config_.threads);
  cp.no_perf = false;
  ctx_.reset(llama_init_from_model(model_->model, cp));
  if (!ctx_)
    return make_error(config_.gguf + ": llama.cpp could not create a context of " +
                      std::to_string(config_.context) + " tokens x " +
                      std::to_string(config_.slots) + " sequences");
  // Persistent compute threads, as llama-server has (its common_threadpools), with
  // ggml's default affinity (used by builds without OpenMP).
  auto tpp = ggml_threadpool_params_default(static_cast<int>(config_.threads));
  threadpool_ = ggml_threadpool_new(&tpp);
  if (!threadpool_)
    return make_error("llama engine: could not start " + std::to_string(config_.threads) +
                      " compute threads");
  llama_attach_threadpool(ctx_.get(), threadpool_, nullptr);
  vocab_ = llama_model_get_vocab(model_->model);
  batch_capacity_ = std::max(config_.batch, config_.slots);
  batch_ = llama_batch_init(static_cast<int32_t>(batch_capacity_), 0, 1);
  slot_owner_.assign(config_.slots, 0);
  slot_used_.assign(config_.slots, false);

  // Learn the state layout from a probe: two tokens in slot 0 of the fresh context.
  const token probe[2] = {llama_vocab_bos(vocab_) >= 0 ? llama_vocab_bos(vocab_) : 0, 1};
  if (auto r = decode_slice(0, probe, 0, false); !r)
    return make_error(config_.gguf + ": probe prefill failed: " + r.message());
  const bool hybrid = model_->facts.hybrid;
  const bool rec_only = model_->facts.recurrent && !hybrid;
  auto full = read_state(0, 0);
  auto partial =
      hybrid ? read_state(0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) : std::vector<std::byte>{};
  llama_memory_seq_rm(mem(), 0, -1, -1);
  llama_perf_context_reset(ctx_.get()); // the probe is not work anyone asked for
  auto lay = codec::discover(full, partial, hybrid, rec_only);
  if (!lay)
    return make_error(config_.gguf + ": architecture " + model_->facts.architecture +
                      " is not supported: " + lay.message());
  layout_ = std::move(lay).value();
  describe();
  return {};
}

void llama_engine::describe() {
  info_.model = model_->facts.name.empty() ? model_->facts.architecture : model_->facts.name;
  for (uint32_t l = 0; l < layout_.n_full(); ++l)
    info_.layers.push_back(layer_kind::full);
  for (uint32_t l = 0; l < layout_.n_linear(); ++l)
    info_.layers.push_back(layer_kind::linear);
  info_.vocab_size = model_->facts.n_vocab;
  info_.eos_token = llama_vocab_eos(vocab_);
  for (token t = 0; t < static_cast<token>(info_.vocab_size); ++t)
    if (llama_vocab_is_eog(vocab_, t))
      info_.end_tokens.push_back(t);
  info_.state_bytes_total = layout_.rec_bytes();
  // Several prompts share a llama_decode when there are slots for them (prefill_batch).
  info_.prefill_batch_tokens = config_.slots > 1 ? config_.batch : 0;
  info_.identity = llama_detail::full_identity(model_->identity_base, layout_text(layout_));
  info_.fingerprint = checksum(info_.identity);
  flops_per_token_ = 2.0 * static_cast<double>(llama_model_n_params(model_->model));
}

result<void> llama_engine::decode_slice(int32_t slot, std::span<const token> tokens, uint32_t pos0,
                                        bool logits) {
  batch_.n_tokens = static_cast<int32_t>(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch_.token[i] = tokens[i];
    batch_.pos[i] = static_cast<llama_pos>(pos0 + i);
    batch_.n_seq_id[i] = 1;
    batch_.seq_id[i][0] = slot;
    batch_.logits[i] = logits && i + 1 == tokens.size();
  }
  const int32_t rc = run_batch();
  if (rc != 0)
    return make_error("llama_decode returned " + std::to_string(rc) +
                      (rc == 1 ? " (no room in the KV cache)" : ""));
  return {};
}

int32_t llama_engine::run_batch() {
  double waited = 0;
  const int32_t rc = cpu_gate::instance().run(
      [&] {
        const int32_t r = llama_decode(ctx_.get(), batch_);
        // Without OpenMP, ggml's own idle compute threads poll for the next graph for a
        // while (ggml's default poll level): the time between graphs belongs to the node's other
        // threads (sampling, the data plane, the gateway, another engine), so they sleep instead
        // and the next graph wakes them. (No effect on the OpenMP build.)
        ggml_threadpool_pause(threadpool_);
        return r;
      },
      waited);
  cpu_wait_s_ += waited;
  return rc;
}

result<void> llama_engine::place(sequence& s, const prefill_request& req, int32_t slot) {
  const uint32_t r = req.reuse_tokens;
  if (r > 0) { // check_reuse: the chunks tile [0, r) and hold every linear state at r
    auto checked =
        check_chunks(info_, req.reuse, r, false, [this](uint32_t l, uint32_t b, uint32_t e) {
          return expected_payload(l, b, e);
        });
    if (!checked)
      return make_error("reuse rejected: " + checked.message());
    if (auto ok = load_chunks(s, req.reuse, *checked, slot); !ok)
      return make_error("reuse rejected: " + ok.message());
  } else {
    s.slot = slot;
    slot_used_[static_cast<size_t>(slot)] = true;
  }
  slot_owner_[static_cast<size_t>(slot)] = req.id;
  return {};
}

std::vector<llama_engine::slice> llama_engine::fill_round(std::span<prefill_item> items) {
  std::vector<slice> round;
  uint32_t used = 0;
  for (auto& it : items) {
    const uint32_t n = static_cast<uint32_t>(it.req->prompt.size());
    if (!it.error.empty() || it.pos >= n)
      continue;
    if (used == config_.batch)
      break;
    const uint32_t every = it.req->checkpoint_interval;
    uint32_t end = std::min(n, it.pos + (config_.batch - used));
    if (every != 0)
      end = std::min(end, (it.pos / every + 1) * every);
    for (uint32_t p = it.pos; p < end; ++p, ++used) {
      batch_.token[used] = it.req->prompt[p];
      batch_.pos[used] = static_cast<llama_pos>(p);
      batch_.n_seq_id[used] = 1;
      batch_.seq_id[used][0] = it.s->slot;
      batch_.logits[used] = p + 1 == n;
    }
    round.push_back({&it, end, end == n ? static_cast<int32_t>(used - 1) : -1});
  }
  batch_.n_tokens = static_cast<int32_t>(used);
  return round;
}

void llama_engine::compute_prompts(std::span<prefill_item> items) {
  uint64_t largest = 0; // the largest state a snapshot will read
  for (auto& it : items) {
    if (!it.error.empty())
      continue;
    const uint32_t r = it.req->reuse_tokens, every = it.req->checkpoint_interval;
    if (every != 0 && r % every == 0 && r > 0)
      save_checkpoint(*it.s, r);
    it.pos = r;
    if (*it.sink)
      largest = std::max(largest, layout_.state_bytes(it.req->prompt.size()));
  }
  if (snap_buf_.size() < largest) {
    // Every slice reads its sequence's whole state (snapshot): one buffer for the
    // largest of them now, rather than a larger one, zeroed and faulted in, every few
    // slices.
    snap_of_.reset();
    snap_buf_ = {};
    snap_buf_.resize(static_cast<size_t>(largest));
  }
  for (auto round = fill_round(items); !round.empty(); round = fill_round(items)) {
    ++prefill_decodes_;
    if (const int32_t rc = run_batch(); rc != 0) {
      for (auto& sl : round)
        sl.it->error = "llama_decode returned " + std::to_string(rc) +
                       (rc == 1 ? " (no room in the KV cache)" : "");
      continue;
    }
    for (auto& sl : round) {
      auto& it = *sl.it;
      auto& s = *it.s;
      const uint32_t n = static_cast<uint32_t>(it.req->prompt.size());
      const uint32_t every = it.req->checkpoint_interval;
      ++s.version;
      if (*it.sink) {
        const auto& st = snapshot(s);
        for (uint32_t l = 0; l < layout_.n_full(); ++l) {
          std::vector<std::byte> payload;
          codec::export_kv(layout_, st, l, it.pos, sl.end, payload);
          (*it.sink)(make_chunk(kv_header(l, it.pos, sl.end, sl.end), std::move(payload)));
        }
      }
      if (every != 0 && sl.end % every == 0)
        save_checkpoint(s, sl.end); // after the export: from the snapshot it just read
      it.pos = sl.end;
      if (sl.logits_at < 0)
        continue;
      // Its last slice: the first token now (the next round's llama_decode overwrites the
      // logits), its end state to its sink while the others compute on.
      prefill_result out;
      out.first_token = sample(s, llama_get_logits_ith(ctx_.get(), sl.logits_at));
      out.first_logprobs = s.logprobs;
      s.rec.pending = out.first_token;
      out.computed_tokens = n - it.req->reuse_tokens;
      if (*it.sink)
        export_end_state(s, n, *it.sink);
      out.modeled_time =
          std::chrono::duration_cast<nanos>(std::chrono::steady_clock::now() - it.started);
      it.done = std::move(out);
      if (it.on_done && *it.on_done)
        (*it.on_done)(it.index, result<prefill_result>(*it.done));
    }
  }
}

void llama_engine::export_end_state(const sequence& s, uint32_t n, const chunk_sink& sink) const {
  const auto& st = snapshot(s);
  for (uint32_t l = 0; l < layout_.n_linear(); ++l) {
    std::vector<std::byte> payload;
    codec::export_rec(layout_, st, l, payload);
    sink(make_chunk(state_header(layout_.n_full() + l, n), std::move(payload)));
  }
  sink(make_meta_chunk(info_, s.rec));
}

void llama_engine::start_prefill(prefill_item& it, std::span<const prefill_item> earlier) {
  const auto& req = *it.req;
  const std::string who = "prefill " + seq_str(req.id);
  if (auto ok = check_prefill(req, who); !ok) {
    it.error = ok.message();
    return;
  }
  for (auto& e : earlier)
    if (e.req->id == req.id) {
      it.error = who + ": the id is twice in one batch";
      return;
    }
  const uint32_t n = static_cast<uint32_t>(req.prompt.size());
  if (n >= config_.context) {
    it.error = who + ": prompt of " + std::to_string(n) + " tokens leaves no room in a " +
               std::to_string(config_.context) + "-token context";
    return;
  }
  it.s = std::make_unique<sequence>();
  auto& s = *it.s;
  s.id = req.id;
  const int32_t slot = claim_slot({}); // the batch's own sequences are not parkable yet
  if (slot < 0) {
    it.error = who + ": no slot";
    return;
  }
  if (auto ok = place(s, req, slot); !ok) {
    it.error = who + ": " + ok.message();
    return;
  }
  s.rec.tokens.assign(req.prompt.begin(), req.prompt.end());
  s.rec.prompt_tokens = n;
  s.rec.sampling = req.sampling;
  s.rec.sampled = req.sampling.first_index;
  s.rec.identity = info_.identity;
}

result<prefill_result> llama_engine::prefill(const prefill_request& req, const chunk_sink& sink) {
  auto out = prefill_batch({&req, 1}, {&sink, 1});
  return std::move(out.front());
}

std::vector<result<prefill_result>>
llama_engine::prefill_batch(std::span<const prefill_request> reqs,
                            std::span<const chunk_sink> sinks, const prefill_done& done) {
  static const chunk_sink no_sink;
  std::vector<result<prefill_result>> out;
  out.reserve(reqs.size());
  // At most a slot per prefill: more requests than slots go in several groups.
  for (size_t first = 0; first < reqs.size(); first += config_.slots) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<prefill_item> items(std::min<size_t>(config_.slots, reqs.size() - first));
    for (size_t i = 0; i < items.size(); ++i) {
      items[i].req = &reqs[first + i];
      items[i].sink = first + i < sinks.size() ? &sinks[first + i] : &no_sink;
      items[i].index = first + i;
      items[i].on_done = &done;
      items[i].started = t0;
      start_prefill(items[i], std::span(items).first(i));
    }
    compute_prompts(items);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    uint32_t computed = 0;
    for (auto& it : items) {
      if (it.error.empty() && !it.done) // cannot happen: every placed prompt ends or fails
        it.error = "prefill " + seq_str(it.req->id) + ": not computed";
      if (!it.error.empty()) {
        if (it.s)
          free_slot(*it.s);
        out.push_back(make_error(it.error));
        if (done)
          done(it.index, out.back());
        continue;
      }
      computed += it.done->computed_tokens;
      it.s->last_used = ++clock_;
      seqs_.emplace(it.req->id, std::move(it.s));
      out.push_back(std::move(*it.done));
    }
    prompt_tokens_ += computed;
    if (computed >= 64 && secs > 0)
      prefill_tps_ =
          prefill_tps_ > 0 ? 0.8 * prefill_tps_ + 0.2 * computed / secs : computed / secs;
  }
  return out;
}

result<std::vector<token>> llama_engine::decode_step(std::span<const seq_id> batch) {
  if (auto ok = check_batch(batch); !ok)
    return ok.err();
  if (batch.size() > config_.slots)
    return make_error("decode: a step of " + std::to_string(batch.size()) +
                      " sequences exceeds the context's " + std::to_string(config_.slots) +
                      " slots");
  for (seq_id id : batch) {
    auto& s = seq(id);
    if (s.rec.tokens.size() + 1 >= config_.context)
      return make_error("decode: " + seq_str(id) + " has filled its context of " +
                        std::to_string(config_.context) + " tokens");
    if (auto ok = make_resident(s, batch); !ok)
      return make_error("decode: " + seq_str(id) + ": " + ok.message());
  }
  const auto t0 = std::chrono::steady_clock::now();
  batch_.n_tokens = static_cast<int32_t>(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& s = seq(batch[i]);
    batch_.token[i] = s.rec.pending;
    batch_.pos[i] = static_cast<llama_pos>(s.rec.tokens.size());
    batch_.n_seq_id[i] = 1;
    batch_.seq_id[i][0] = s.slot;
    batch_.logits[i] = 1;
  }
  if (const int32_t rc = run_batch(); rc != 0)
    return make_error("decode: llama_decode returned " + std::to_string(rc));
  std::vector<token> out;
  out.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& s = seq(batch[i]);
    s.rec.tokens.push_back(s.rec.pending);
    s.rec.pending = sample(s, llama_get_logits_ith(ctx_.get(), static_cast<int32_t>(i)));
    ++s.version;
    out.push_back(s.rec.pending);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double per_token = secs / static_cast<double>(batch.size());
  decode_s_per_token_ =
      decode_s_per_token_ > 0 ? 0.9 * decode_s_per_token_ + 0.1 * per_token : per_token;
  return out;
}

result<void> llama_engine::import_sequence(seq_id id, std::span<const kv_chunk> chunks) {
  auto rec = check_import(id, chunks);
  if (!rec)
    return rec.err();
  if (rec->tokens.size() + 1 >= config_.context)
    return make_error("import " + seq_str(id) + ": " + std::to_string(rec->tokens.size()) +
                      " tokens leave no room in a " + std::to_string(config_.context) +
                      "-token context");
  // check_import validated every chunk; this cannot fail on their account.
  auto checked = check_chunks(info_, chunks, 0, true, [this](uint32_t l, uint32_t b, uint32_t e) {
    return expected_payload(l, b, e);
  });
  if (!checked)
    return make_error("import " + seq_str(id) + ": " + checked.message());
  auto owned = std::make_unique<sequence>();
  owned->id = id;
  int32_t slot = -1;
  for (uint32_t i = 0; i < slot_used_.size() && slot < 0; ++i)
    if (!slot_used_[i])
      slot = static_cast<int32_t>(i);
  if (auto ok = load_chunks(*owned, chunks, *checked, slot); !ok)
    return make_error("import " + seq_str(id) + ": " + ok.message());
  owned->rec = std::move(rec).value();
  owned->last_used = ++clock_;
  if (owned->slot >= 0)
    slot_owner_[static_cast<size_t>(owned->slot)] = id;
  seqs_.emplace(id, std::move(owned));
  return {};
}

void llama_engine::release(seq_id id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return;
  free_slot(static_cast<sequence&>(*it->second));
  seqs_.erase(it);
}

double llama_engine::prefill_seconds(uint64_t tokens) const {
  // The measured pace once there is one; before, the weights' FLOPs at 20 GFLOP/s a
  // thread (a rough figure for an AVX2 core).
  const double tps =
      prefill_tps_ > 0 ? prefill_tps_ : 20e9 * config_.threads / std::max(flops_per_token_, 1.0);
  return static_cast<double>(tokens) / tps;
}

double llama_engine::decode_seconds(uint32_t batch, uint64_t) const {
  const double per_token = decode_s_per_token_ > 0
                               ? decode_s_per_token_
                               : std::max(flops_per_token_, 1.0) / (20e9 * config_.threads);
  return per_token * batch;
}

double llama_engine::kv_bytes(uint64_t tokens) const {
  return static_cast<double>(tokens * layout_.kv_bytes_per_token() + layout_.rec_bytes());
}

std::vector<engine_counter> llama_engine::counters() const {
  const auto p = llama_perf_context(ctx_.get());
  // llama.cpp reports at least 1 for each count; no time spent means none was counted.
  const double n_p_eval = p.t_p_eval_ms > 0 ? p.n_p_eval : 0;
  const double n_eval = p.t_eval_ms > 0 ? p.n_eval : 0;
  return {
      {"llama_n_p_eval", "tokens llama.cpp evaluated in batches of several (its prompt-eval count)",
       n_p_eval},
      {"llama_n_eval", "llama.cpp's single-token evaluations (its eval count)", n_eval},
      {"llama_p_eval_seconds", "llama.cpp's time in batches of several tokens",
       p.t_p_eval_ms / 1e3},
      {"llama_eval_seconds", "llama.cpp's time in single-token evaluations", p.t_eval_ms / 1e3},
      {"llama_prompt_tokens_computed", "prompt tokens this engine's prefills computed",
       static_cast<double>(prompt_tokens_)},
      {"llama_prefill_decodes",
       "llama_decode calls of prefills (each a slice of one prompt, or of several prefilled "
       "together)",
       static_cast<double>(prefill_decodes_)},
      {"llama_sequence_swaps", "sequences parked to host memory or loaded back",
       static_cast<double>(swaps_)},
      {"llama_cpu_turn_wait_seconds",
       "time this engine's graphs queued behind the process's other llama graphs", cpu_wait_s_},
  };
}

} // namespace llama_detail

result<gguf_facts> inspect_gguf(const std::string& path) {
  auto m = llama_detail::load_model(path, true);
  if (!m)
    return m.err();
  return (*m)->facts;
}

result<std::unique_ptr<engine>> make_llama_engine(const llama_config& config) {
  return llama_detail::llama_engine::create(config);
}

} // namespace prfaas::engine
