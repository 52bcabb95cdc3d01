#pragma once
// Shared by the llama engine tests: the tiny models (build/models, written by
// prfaas-gguf at build time), engines with the tests' settings, prompts and a
// prefill → decode helper.

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "prfaas/engine/llama_engine.hpp"
#include "prfaas/engine/rng.hpp"

namespace prfaas::engine::test {

inline std::string model_path(const std::string& name) {
  return std::string{PRFAAS_MODELS_DIR} + "/" + name + ".gguf";
}

/// One thread: the tests share two cores, and ggml's threads spin.
inline llama_config settings(const std::string& model, uint32_t slots = 2) {
  llama_config c;
  c.gguf = model_path(model);
  c.context = 4096;
  c.batch = 256;
  c.ubatch = 128;
  c.threads = 1;
  c.slots = slots;
  return c;
}

inline std::unique_ptr<engine> make(const std::string& model, uint32_t slots = 2) {
  auto e = make_llama_engine(settings(model, slots));
  if (!e)
    FAIL(e.message());
  return std::move(e).value();
}

inline std::unique_ptr<tokenizer> vocab_of(const std::string& model) {
  auto t = make_llama_tokenizer(model_path(model));
  if (!t)
    FAIL(t.message());
  return std::move(t).value();
}

/// Prompts of `n` tokens: real text through the model's vocabulary, or random token
/// ids (any id of the vocabulary), alternately.
inline std::vector<token> prompt_of(const tokenizer& tok, xoshiro256& rng, size_t n, bool text) {
  std::vector<token> out;
  if (text) {
    static const std::string words[] = {
        "The ",          "KVCache ", "of ",       "hybrid ",  "models ", "crosses ",
        "datacenters; ", "préfill ", "数据中心 ", "decode. ", "\n"};
    std::string s;
    while (out.size() < n) {
      s += words[rng.below(11)];
      out = tok.tokenize(s, false, false).value();
    }
  } else {
    while (out.size() < n)
      out.push_back(static_cast<token>(rng.below(tok.vocab_size())));
  }
  out.resize(n);
  return out;
}

inline double counter(const engine& e, const std::string& name) {
  for (auto& c : e.counters())
    if (c.name == name)
      return c.value;
  FAIL("no counter " << name);
  return -1;
}

/// Decodes `n` more tokens of `id` alone (one sequence per step).
inline std::vector<token> decode_n(engine& e, seq_id id, size_t n) {
  std::vector<token> out;
  for (size_t i = 0; i < n; ++i) {
    auto r = e.decode_step({&id, 1});
    REQUIRE(r.ok());
    out.push_back(r.value()[0]);
  }
  return out;
}

} // namespace prfaas::engine::test
