// The llama.cpp engine, bit for bit: a sequence prefilled by one engine (one
// llama_context), its KVCache and linear-attention state exported as chunks, put on the
// wire and imported by another, decodes exactly the tokens one context doing both
// produces with the same n_batch/n_ubatch/threads and slice boundaries — on a hybrid of
// each family (Qwen3.5: Gated DeltaNet + gated attention; Kimi Linear: KDA + MLA) and a
// plain transformer; greedy and seeded. The same for a prefill that starts from a
// reused prefix (its own cached blocks or another engine's), against a context sliced
// at the same reuse boundary. llama.cpp's own counters say what was evaluated.

#include "llama_fixture.hpp"

#include <array>
#include <cmath>

#include "prfaas/engine/kv_chunk.hpp"

using namespace prfaas::engine;
using namespace prfaas::engine::test;

namespace {

constexpr uint32_t block = 64;    ///< checkpoint interval (the prefix cache's block)
constexpr size_t new_tokens = 64; ///< decoded after the first token

/// Through the wire format and back: what a receiving node parses.
std::vector<kv_chunk> over_the_wire(const std::vector<kv_chunk>& chunks) {
  std::vector<std::byte> wire;
  for (auto& c : chunks)
    serialize_append(c, wire);
  auto parsed = parse_stream(wire);
  REQUIRE(parsed.ok());
  return std::move(parsed).value();
}

/// First token plus `new_tokens` decoded by one engine doing everything.
std::vector<token> one_context(engine& e, seq_id id, const prefill_request& base) {
  prefill_request req = base;
  req.id = id;
  auto r = e.prefill(req, {});
  INFO((r.ok() ? std::string{} : r.message()));
  REQUIRE(r.ok());
  std::vector<token> out{r->first_token};
  auto rest = decode_n(e, id, new_tokens);
  out.insert(out.end(), rest.begin(), rest.end());
  e.release(id);
  return out;
}

} // namespace

TEST_CASE("prefill here, KV and state over the wire, decode there: the tokens of one context") {
  for (const char* model : {"tiny-qwen35", "tiny-kimi-linear", "tiny-qwen2"}) {
    INFO("model " << model);
    auto ref = make(model);
    auto prefill = make(model);
    auto decode = make(model, 4);
    auto tok = vocab_of(model);
    xoshiro256 rng(7);
    // 30 prompts from 1 token to a quarter of the context, text and random ids,
    // each greedy and seeded.
    for (int i = 0; i < 30; ++i) {
      const double u = rng.uniform_double();
      const size_t n = std::max<size_t>(1, static_cast<size_t>(std::exp(u * std::log(1024.0))));
      const auto prompt = prompt_of(*tok, rng, n, i % 2 == 0);
      for (bool greedy : {true, false}) {
        INFO("prompt " << i << " of " << n << " tokens, " << (greedy ? "greedy" : "seeded"));
        prefill_request req;
        req.prompt = prompt;
        req.checkpoint_interval = block;
        req.sampling = greedy ? sampling_params{} : sampling_params{0.9f, rng.next()};
        const auto want = one_context(*ref, 1, req);

        req.id = 10;
        std::vector<kv_chunk> chunks;
        auto r = prefill->prefill(req, [&](kv_chunk&& c) { chunks.push_back(std::move(c)); });
        REQUIRE(r.ok());
        prefill->release(10);
        const seq_id id = 100 + static_cast<seq_id>(i);
        REQUIRE(decode->import_sequence(id, over_the_wire(chunks)).ok());
        CHECK(decode->length(id) == n);
        std::vector<token> got{r->first_token};
        auto rest = decode_n(*decode, id, new_tokens);
        got.insert(got.end(), rest.begin(), rest.end());
        decode->release(id);
        CHECK(got == want);
      }
    }
    // The decoding engine computed no prompt: llama.cpp counted single-token steps only.
    CHECK(counter(*decode, "llama_n_p_eval") == 0);
    CHECK(counter(*decode, "llama_n_eval") == 60 * new_tokens);
  }
}

TEST_CASE("a prefill from a reused prefix equals a context sliced at the reuse boundary") {
  for (const char* model : {"tiny-qwen35", "tiny-kimi-linear", "tiny-qwen2"}) {
    INFO("model " << model);
    auto ref = make(model);
    auto owner = make(model); // the engine whose cache holds the prefix
    auto other = make(model); // another node's engine that receives it
    auto tok = vocab_of(model);
    xoshiro256 rng(11);
    for (int i = 0; i < 6; ++i) {
      INFO("round " << i);
      const size_t n = 300 + rng.below(700);
      const auto first = prompt_of(*tok, rng, n, i % 2 == 0);
      prefill_request req;
      req.id = 1;
      req.prompt = first;
      req.checkpoint_interval = block;
      REQUIRE(owner->prefill(req, {}).ok());
      // The prefix cache's view: the blocks' KV and the state after the last one.
      const uint32_t reuse = static_cast<uint32_t>((n - 1) / block * block);
      std::vector<kv_chunk> cached;
      for (uint32_t b = 0; b < reuse; b += block) {
        auto kv = owner->export_kv(1, b, b + block);
        REQUIRE(kv.ok());
        for (auto& c : *kv)
          cached.push_back(std::move(c));
      }
      auto state = owner->export_checkpoint(1, reuse);
      REQUIRE(state.ok());
      for (auto& c : *state)
        cached.push_back(std::move(c));
      owner->release(1);
      cached = over_the_wire(cached);

      // A new prompt sharing that prefix, prefilled from it on the other engine.
      auto second = std::vector<token>(first.begin(), first.begin() + reuse);
      const auto tail = prompt_of(*tok, rng, 1 + rng.below(300), i % 2 != 0);
      second.insert(second.end(), tail.begin(), tail.end());
      prefill_request from_cache;
      from_cache.id = 2;
      from_cache.prompt = second;
      from_cache.reuse = cached;
      from_cache.reuse_tokens = reuse;
      from_cache.checkpoint_interval = block;
      from_cache.sampling = {0.7f, 42};
      const double before = counter(*other, "llama_n_p_eval");
      auto r = other->prefill(from_cache, {});
      REQUIRE(r.ok());
      CHECK(r->computed_tokens == second.size() - reuse);
      // llama.cpp's own count: only the uncached tokens were evaluated.
      const double evaluated = counter(*other, "llama_n_p_eval") - before;
      CHECK((evaluated == second.size() - reuse || (second.size() - reuse == 1 && evaluated == 0)));
      std::vector<token> got{r->first_token};
      auto rest = decode_n(*other, 2, new_tokens);
      got.insert(got.end(), rest.begin(), rest.end());
      other->release(2);

      prefill_request whole;
      whole.prompt = second;
      whole.checkpoint_interval = block; // slices end at the same block boundaries
      whole.sampling = {0.7f, 42};
      CHECK(got == one_context(*ref, 3, whole));
    }
  }
}

TEST_CASE("prompts prefilled together: one llama_decode for short ones, each as if alone") {
  for (const char* model : {"tiny-qwen35", "tiny-kimi-linear", "tiny-qwen2"}) {
    INFO("model " << model);
    auto alone = make(model);
    auto together = make(model, 4);
    auto decode = make(model, 4);
    auto tok = vocab_of(model);
    CHECK(together->info().prefill_batch_tokens == settings(model).batch);
    CHECK(alone->info().prefill_batch_tokens == 256); // two slots: two prompts at once
    CHECK(make(model, 1)->info().prefill_batch_tokens == 0);
    xoshiro256 rng(23);
    for (bool short_ones : {true, false}) {
      INFO((short_ones ? "four short prompts" : "slices across checkpoints, six prompts"));
      std::vector<std::vector<token>> prompts;
      const size_t count = short_ones ? 4 : 6; // six: more than the four slots
      for (size_t i = 0; i < count; ++i)
        prompts.push_back(
            prompt_of(*tok, rng, short_ones ? 1 + rng.below(60) : 1 + rng.below(700), i % 2 == 0));
      std::vector<prefill_request> reqs(count);
      std::vector<std::vector<kv_chunk>> chunks(count);
      std::vector<chunk_sink> sinks;
      for (size_t i = 0; i < count; ++i) {
        reqs[i].id = 20 + i;
        reqs[i].prompt = prompts[i];
        reqs[i].checkpoint_interval = short_ones ? 0 : block;
        reqs[i].sampling = i % 2 == 0 ? sampling_params{} : sampling_params{0.9f, rng.next()};
        sinks.push_back([&chunks, i](kv_chunk&& c) { chunks[i].push_back(std::move(c)); });
      }
      const double decodes = counter(*together, "llama_prefill_decodes");
      // Each request is reported done once, as soon as its own chunks are all out
      // (its meta chunk last), with the result the call returns for it.
      std::vector<int> told(count, 0);
      std::vector<std::optional<token>> told_token(count);
      std::vector<size_t> chunks_when_told(count, 0);
      auto results =
          together->prefill_batch(reqs, sinks, [&](size_t i, const result<prefill_result>& r) {
            REQUIRE(i < count);
            ++told[i];
            REQUIRE(r.ok());
            told_token[i] = r->first_token;
            chunks_when_told[i] = chunks[i].size();
            REQUIRE_FALSE(chunks[i].empty());
            CHECK(chunks[i].back().header.kind == layer_kind::meta);
          });
      REQUIRE(results.size() == count);
      for (size_t i = 0; i < count; ++i) {
        CHECK(told[i] == 1);
        CHECK(chunks_when_told[i] == chunks[i].size()); // nothing after it
        CHECK(told_token[i] == results[i]->first_token);
      }
      if (short_ones) // at most 240 tokens: one slice each, all in one llama_decode
        CHECK(counter(*together, "llama_prefill_decodes") - decodes == 1);
      for (size_t i = 0; i < count; ++i) {
        INFO("prompt " << i << " of " << prompts[i].size() << " tokens");
        REQUIRE(results[i].ok());
        CHECK(results[i]->computed_tokens == prompts[i].size());
        CHECK(together->length(reqs[i].id) == prompts[i].size());
        // Its chunks on another engine decode what the engine that prefilled it does.
        const seq_id id = 60 + static_cast<seq_id>(i);
        REQUIRE(decode->import_sequence(id, over_the_wire(chunks[i])).ok());
        std::vector<token> got{results[i]->first_token};
        auto rest = decode_n(*decode, id, new_tokens);
        got.insert(got.end(), rest.begin(), rest.end());
        decode->release(id);
        std::vector<token> own{results[i]->first_token};
        rest = decode_n(*together, reqs[i].id, new_tokens);
        own.insert(own.end(), rest.begin(), rest.end());
        together->release(reqs[i].id);
        CHECK(got == own);
        // And what one engine prefilling it alone does, on the hybrids: llama.cpp
        // splits a batch of several sequences into ubatches of equal length per
        // sequence for their recurrent layers. A plain transformer's attention sums
        // over the batch's padded KV length, so its logits may differ from a lone
        // prefill's in the last bits (as llama-server's do), and sampling follows them.
        if (std::string(model) != "tiny-qwen2")
          CHECK(got == one_context(*alone, 1, reqs[i]));
      }
    }
    // One bad request fails alone: a token outside the vocabulary, an id given twice.
    const auto ok_prompt = prompt_of(*tok, rng, 30, true);
    std::vector<token> bad_prompt = ok_prompt;
    bad_prompt[3] = static_cast<token>(tok->vocab_size() + 5);
    std::vector<prefill_request> reqs(3);
    reqs[0].id = 7;
    reqs[0].prompt = ok_prompt;
    reqs[1].id = 8;
    reqs[1].prompt = bad_prompt;
    reqs[2].id = 7;
    reqs[2].prompt = ok_prompt;
    std::vector<int> told(3, 0);
    auto results =
        together->prefill_batch(reqs, {}, [&](size_t i, const result<prefill_result>& r) {
          REQUIRE(i < 3);
          ++told[i];
          CHECK(r.ok() == (i == 0)); // the failures are told too
        });
    CHECK(told == std::vector<int>{1, 1, 1});
    REQUIRE(results.size() == 3);
    CHECK(results[0].ok());
    REQUIRE_FALSE(results[1].ok());
    CHECK_THAT(results[1].message(), Catch::Contains("prefill sequence 8"));
    REQUIRE_FALSE(results[2].ok());
    CHECK_THAT(results[2].message(), Catch::Contains("twice in one batch"));
    CHECK(together->contains(7));
    CHECK_FALSE(together->contains(8));
  }
}

TEST_CASE("a 90%-cached prompt of 2K+ tokens evaluates only its uncached tokens") {
  auto e = make("tiny-qwen35");
  auto tok = vocab_of("tiny-qwen35");
  xoshiro256 rng(3);
  const auto prompt = prompt_of(*tok, rng, 2304, true);
  prefill_request req;
  req.id = 1;
  req.prompt = prompt;
  req.checkpoint_interval = block;
  REQUIRE(e->prefill(req, {}).ok());
  CHECK(counter(*e, "llama_n_p_eval") == 2304);
  const uint32_t reuse = 2112; // 33 blocks: 91.7% of the prompt
  std::vector<kv_chunk> cached;
  for (uint32_t b = 0; b < reuse; b += block) {
    auto kv = e->export_kv(1, b, b + block);
    REQUIRE(kv.ok());
    for (auto& c : *kv)
      cached.push_back(std::move(c));
  }
  auto state = e->export_checkpoint(1, reuse);
  REQUIRE(state.ok());
  for (auto& c : *state)
    cached.push_back(std::move(c));
  e->release(1);
  prefill_request again = req;
  again.id = 2;
  again.reuse = cached;
  again.reuse_tokens = reuse;
  auto r = e->prefill(again, {});
  REQUIRE(r.ok());
  CHECK(r->computed_tokens == 2304 - reuse);
  CHECK(counter(*e, "llama_n_p_eval") == 2304 + (2304 - reuse));
  // A prompt cached in full still computes: recurrent state exists only where it was
  // saved, so the cache must leave at least one token (the prefix cache steps back a block).
  prefill_request full = req;
  full.id = 3;
  full.reuse = cached;
  full.reuse_tokens = static_cast<uint32_t>(prompt.size());
  CHECK_FALSE(e->prefill(full, {}).ok());
}

TEST_CASE("continuous batching and parking: a step of many sequences, more sequences than slots") {
  auto ref = make("tiny-qwen35");
  auto e = make("tiny-qwen35", 2); // two slots, five sequences
  auto tok = vocab_of("tiny-qwen35");
  xoshiro256 rng(5);
  std::vector<std::vector<token>> want;
  std::vector<std::vector<kv_chunk>> exported;
  std::vector<std::vector<token>> prompts;
  for (int i = 0; i < 5; ++i)
    prompts.push_back(prompt_of(*tok, rng, 50 + rng.below(400), true));
  for (int i = 0; i < 5; ++i) {
    prefill_request req;
    req.prompt = prompts[i]; // a span: the prompt lives in `prompts`
    req.sampling = {0.8f, static_cast<uint64_t>(i)};
    req.checkpoint_interval = block;
    want.push_back(one_context(*ref, 1, req));
    req.id = 50;
    std::vector<kv_chunk> chunks;
    auto r = ref->prefill(req, [&](kv_chunk&& c) { chunks.push_back(std::move(c)); });
    REQUIRE(r.ok());
    ref->release(50);
    REQUIRE(e->import_sequence(static_cast<seq_id>(i + 1), chunks).ok());
    exported.push_back(std::move(chunks));
  }
  std::vector<std::vector<token>> got(5);
  for (int i = 0; i < 5; ++i)
    got[i].push_back(want[i][0]); // the first token comes with the transfer
  // Steps of two sequences, rotating through all five: every step swaps some in.
  for (size_t step = 0; step < new_tokens * 5 / 2; ++step) {
    const seq_id a = 1 + (2 * step) % 5, b = 1 + (2 * step + 1) % 5;
    const seq_id batch[2] = {a, b};
    if (got[a - 1].size() > new_tokens || got[b - 1].size() > new_tokens)
      continue;
    auto r = e->decode_step(batch);
    REQUIRE(r.ok());
    got[a - 1].push_back((*r)[0]);
    got[b - 1].push_back((*r)[1]);
  }
  for (int i = 0; i < 5; ++i) {
    INFO("sequence " << i);
    got[i].resize(std::min(got[i].size(), want[i].size()));
    CHECK(got[i] == std::vector<token>(want[i].begin(), want[i].begin() + got[i].size()));
    CHECK(got[i].size() > new_tokens / 2);
  }
  CHECK(counter(*e, "llama_sequence_swaps") > 0);
  // A step larger than the slots is refused, not half-done.
  const seq_id three[3] = {1, 2, 3};
  CHECK_FALSE(e->decode_step(three).ok());
}

TEST_CASE("the GGUF's vocabulary: real tokens, pieces that spell the text, its chat template") {
  auto tok = vocab_of("tiny-qwen35");
  const std::string text =
      "Prefill-as-a-Service ships KVCache across datacenters: 数据中心 🙂";
  auto tokens = tok->tokenize(text, false, false).value();
  CHECK(tokens.size() < text.size() / 2); // a real BPE vocabulary, not bytes
  std::string joined;
  for (auto t : tokens)
    joined += tok->piece(t);
  CHECK(joined == text);
  // Streamed token by token, the detokenizer never emits half a character.
  detokenizer d(*tok);
  std::string streamed;
  for (auto t : tokens) {
    auto part = d.feed(t);
    CHECK(utf8_sanitize(part) == part);
    streamed += part;
  }
  streamed += d.flush();
  CHECK(streamed == text);
  // The chat template is the GGUF's (ChatML, with Qwen's default system prompt).
  std::vector<chat_message> chat{{"user", "Hello"}};
  auto rendered = tok->chat_prompt(chat);
  REQUIRE(rendered.ok());
  CHECK(*rendered == "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
                     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
  CHECK(tok->chat_has_special());
  auto special = tok->tokenize(*rendered, true, true).value();
  CHECK(special.size() < tok->tokenize(*rendered, true, false).value().size());
  CHECK(tok->is_end(special[5]) == false);
  // The end of a turn ends the output.
  auto im_end = tok->tokenize("<|im_end|>", false, true).value();
  REQUIRE(im_end.size() == 1);
  CHECK(tok->is_end(im_end[0]));
  CHECK(tok->piece(im_end[0]).empty());
}

TEST_CASE(
    "weights in extra buffer types: the same model, and their state decodes on plain weights") {
  // tiny-qwen35-f16: on a CPU with AMX, ggml's AMX buffer type takes its F16 matrices
  // (elsewhere the two engines lay the weights out alike). Not Kimi Linear: llama.cpp
  // v0.5.0's scheduler asserts on its graph with extra buffer types (docs/llama.md).
  const std::string model = "tiny-qwen35-f16";
  auto fast_config = settings(model);
  fast_config.extra_buffer_types = true;
  auto made = make_llama_engine(fast_config);
  REQUIRE(made.ok());
  auto fast = std::move(made).value();
  auto again = make_llama_engine(fast_config);
  REQUIRE(again.ok());
  auto fast2 = std::move(again).value();
  auto plain = make(model);
  auto decode = make(model, 4);
  auto decode2 = make(model, 4);
  auto tok = vocab_of(model);
  // The KV and recurrent state are laid out alike: the same identity.
  CHECK(fast->info().fingerprint == plain->info().fingerprint);
  xoshiro256 rng(11);
  double worst = 0; // largest |logprob difference| of the same token between layouts
  for (int i = 0; i < 8; ++i) {
    const size_t n = std::array<size_t, 8>{1, 7, 64, 65, 200, 511, 513, 1000}[i];
    const auto prompt = prompt_of(*tok, rng, n, i % 2 == 0);
    INFO("prompt " << i << " of " << n << " tokens");
    prefill_request req;
    req.prompt = prompt;
    req.checkpoint_interval = block;
    req.sampling.logprobs = 5;
    // Prefilled on the fast weights, shipped, decoded on plain ones, twice over
    // separate engines: the same tokens, and no prompt token computed by the decoder.
    std::vector<std::vector<token>> runs;
    for (auto [p, d] :
         {std::pair{fast.get(), decode.get()}, std::pair{fast2.get(), decode2.get()}}) {
      req.id = 10 + i;
      std::vector<kv_chunk> chunks;
      auto r = p->prefill(req, [&](kv_chunk&& c) { chunks.push_back(std::move(c)); });
      REQUIRE(r.ok());
      p->release(req.id);
      REQUIRE(d->import_sequence(req.id, over_the_wire(chunks)).ok());
      CHECK(d->length(req.id) == n);
      std::vector<token> got{r->first_token};
      auto rest = decode_n(*d, req.id, 16);
      got.insert(got.end(), rest.begin(), rest.end());
      d->release(req.id);
      runs.push_back(std::move(got));
      // The first token's distribution is the plain weights' to rounding.
      if (p == fast.get()) {
        req.id = 50 + i;
        auto ref = plain->prefill(req, {});
        REQUIRE(ref.ok());
        plain->release(req.id);
        REQUIRE(r->first_logprobs);
        REQUIRE(ref->first_logprobs);
        for (auto& want : ref->first_logprobs->top) {
          for (auto& have : r->first_logprobs->top)
            if (have.id == want.id)
              worst = std::max(worst, static_cast<double>(std::abs(have.logprob - want.logprob)));
        }
      }
    }
    CHECK(runs[0] == runs[1]);
  }
  // Measured on a Sapphire Rapids VM (AMX): 6e-3, against a spread of ~0.5 between a
  // prompt's 5 most likely tokens; 0 where both layouts are the same.
  INFO("largest logprob difference " << worst);
  CHECK(worst < 0.05);
  CHECK(counter(*decode, "llama_n_p_eval") == 0);
  CHECK(counter(*decode2, "llama_n_p_eval") == 0);
  CHECK(counter(*decode, "llama_n_eval") == 8 * 16);
}

TEST_CASE("config errors: what a GGUF cannot be is said before anything starts") {
  auto missing = make_llama_engine(llama_config{.gguf = "/nonexistent/model.gguf"});
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(), Catch::Matchers::Contains("no such file"));
  auto big = settings("tiny-qwen35");
  big.context = 1u << 20;
  auto too_big = make_llama_engine(big);
  REQUIRE_FALSE(too_big.ok());
  CHECK_THAT(too_big.message(), Catch::Matchers::Contains("larger than the model's"));
  auto facts = inspect_gguf(model_path("tiny-kimi-linear"));
  REQUIRE(facts.ok());
  CHECK(facts->architecture == "kimi-linear");
  CHECK(facts->hybrid);
  CHECK(facts->n_ctx_train == 8192);
  CHECK(facts->unsupported.empty());
  // Kimi Linear with extra buffer types: llama.cpp would abort the process; refused.
  auto kimi = settings("tiny-kimi-linear");
  kimi.extra_buffer_types = true;
  auto refused = make_llama_engine(kimi);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.message(), Catch::Matchers::Contains("extra buffer types"));
  CHECK_THAT(refused.message(), Catch::Matchers::Contains("aborts on kimi-linear"));
}
