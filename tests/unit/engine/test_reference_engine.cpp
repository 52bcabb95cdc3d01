#include "engine_test_util.hpp"

#include "prfaas/engine/sequence_record.hpp"

using namespace prfaas::engine;
using namespace prfaas::engine::test;

namespace {

std::vector<kv_chunk> prefilled_export(reference_engine& e, seq_id id, size_t len, uint64_t seed) {
  xoshiro256 rng(seed);
  auto prompt = random_prompt(rng, len);
  prefill_request r;
  r.id = id;
  r.prompt = prompt;
  REQUIRE(e.prefill(r, {}).ok());
  auto x = e.export_sequence(id);
  REQUIRE(x.ok());
  return std::move(x).value();
}

/// Re-seal a tampered chunk so only the intended inconsistency remains.
void reseal(kv_chunk& c) {
  c = make_chunk(c.header, c.payload);
}

} // namespace

TEST_CASE("reference engine rejects bad configs") {
  reference_config c;
  c.layer_pattern = "LLXF";
  CHECK_FALSE(reference_engine::create(c).ok());
  c = {};
  c.head_dim = 12;
  CHECK(contains(reference_engine::create(c).message(), "head_dim"));
  c = {};
  c.layer_pattern = "";
  CHECK_FALSE(reference_engine::create(c).ok());
}

TEST_CASE("reference engine model shape is hybrid 3 to 1") {
  auto e = make_reference();
  const auto& info = e->info();
  REQUIRE(info.n_layers() == 8);
  CHECK(info.n_full() == 2);
  CHECK(info.n_linear() == 6);
  CHECK(info.layers[3] == layer_kind::full);
  CHECK(info.layers[7] == layer_kind::full);
  CHECK(info.vocab_size == 257);
  // KV grows per token, linear state does not.
  CHECK(e->kv_bytes(100) - e->kv_bytes(0) == 100.0 * 2 * e->kv_bytes_per_token_layer());
  CHECK(e->kv_bytes(0) == static_cast<double>(6 * e->state_bytes_per_layer()));
  CHECK(e->prefill_seconds(4096) > e->prefill_seconds(1024));
  CHECK(e->decode_seconds(8, 1000) > e->decode_seconds(1, 1000));
}

TEST_CASE("reference tokenize is byte level") {
  auto t = reference_engine::tokenize("a\xc3\xa9\xff");
  REQUIRE(t.size() == 4);
  CHECK(t[0] == 'a');
  CHECK(t[1] == 0xc3);
  CHECK(t[3] == 0xff);
}

TEST_CASE("reference engines with the same seed agree and other seeds differ") {
  auto a = make_reference(), b = make_reference();
  reference_config other;
  other.weight_seed = 2;
  auto c = make_reference(other);
  xoshiro256 rng(7);
  auto prompt = random_prompt(rng, 300);
  prefill_request r;
  r.id = 1;
  r.prompt = prompt;
  REQUIRE(a->prefill(r, {}).ok());
  REQUIRE(b->prefill(r, {}).ok());
  REQUIRE(c->prefill(r, {}).ok());
  CHECK(a->last_logits(1).value() == b->last_logits(1).value());
  CHECK(a->last_logits(1).value() != c->last_logits(1).value());
  CHECK(a->info().fingerprint == b->info().fingerprint);
  CHECK(a->info().fingerprint != c->info().fingerprint);
  CHECK(decode_n(*a, 1, 16) == decode_n(*b, 1, 16));
}

TEST_CASE("reference prefill streams one chunk per layer in order then meta") {
  auto e = make_reference();
  xoshiro256 rng(3);
  auto prompt = random_prompt(rng, 200);
  std::vector<kv_chunk> streamed;
  prefill_request r;
  r.id = 9;
  r.prompt = prompt;
  auto res = e->prefill(r, [&](kv_chunk&& c) { streamed.push_back(std::move(c)); });
  REQUIRE(res.ok());
  CHECK(res->computed_tokens == 200);
  REQUIRE(streamed.size() == 9);
  for (uint32_t l = 0; l < 8; ++l) {
    CHECK(streamed[l].header.layer == l);
    CHECK(streamed[l].header.kind == e->info().layers[l]);
  }
  CHECK(streamed[8].header.kind == layer_kind::meta);
  // The stream is itself a complete, importable export.
  auto f = make_reference();
  REQUIRE(f->import_sequence(9, streamed).ok());
  CHECK(decode_n(*e, 9, 8) == decode_n(*f, 9, 8));
}

TEST_CASE("prefill_batch one after the other tells each request's end before the next starts") {
  // The engine interface's own prefill_batch (the reference engine has no batched one).
  auto e = make_reference();
  xoshiro256 rng(4);
  std::vector<std::vector<token>> prompts{random_prompt(rng, 40), random_prompt(rng, 70), {}};
  std::vector<prefill_request> reqs(3);
  std::vector<std::vector<kv_chunk>> chunks(3);
  std::vector<chunk_sink> sinks;
  for (size_t i = 0; i < 3; ++i) {
    reqs[i].id = 30 + i;
    reqs[i].prompt = prompts[i]; // the third is empty: refused
    sinks.push_back([&chunks, i](kv_chunk&& c) { chunks[i].push_back(std::move(c)); });
  }
  std::vector<std::string> heard;
  auto results = e->prefill_batch(reqs, sinks, [&](size_t i, const result<prefill_result>& r) {
    std::string what = std::to_string(i) + (r.ok() ? ":ok" : ":failed");
    for (size_t k = 0; k < 3; ++k) // whose chunks are out when request i is told
      what += "," + std::to_string(chunks[k].size());
    heard.push_back(what);
  });
  REQUIRE(results.size() == 3);
  CHECK(results[0].ok());
  CHECK(results[1].ok());
  CHECK_FALSE(results[2].ok());
  // 8 layers and a meta chunk each; request 1 computes only after 0 was told.
  CHECK(heard == std::vector<std::string>{"0:ok,9,0,0", "1:ok,9,9,0", "2:failed,9,9,0"});
}

TEST_CASE("reference decode validates the batch") {
  auto e = make_reference();
  const seq_id unknown[1] = {5};
  CHECK(contains(e->decode_step(unknown).message(), "unknown sequence 5"));
  std::vector<token> p = {1, 2, 3};
  prefill_request r;
  r.id = 5;
  r.prompt = p;
  REQUIRE(e->prefill(r, {}).ok());
  const seq_id twice[2] = {5, 5};
  CHECK(contains(e->decode_step(twice).message(), "twice"));
  CHECK(e->length(5) == 3);
}

TEST_CASE("reference prefill validates its request") {
  auto e = make_reference();
  std::vector<token> bad = {1, 300};
  prefill_request r;
  r.id = 1;
  r.prompt = bad;
  CHECK(contains(e->prefill(r, {}).message(), "outside vocab"));
  std::vector<token> empty;
  r.prompt = empty;
  CHECK_FALSE(e->prefill(r, {}).ok());
  std::vector<token> ok = {1, 2};
  r.prompt = ok;
  r.reuse_tokens = 2;
  CHECK(contains(e->prefill(r, {}).message(), "nothing to compute"));
  CHECK_FALSE(e->contains(1));
}

TEST_CASE("reference seeded sampling is reproducible and seed dependent") {
  auto e = make_reference();
  xoshiro256 rng(11);
  auto prompt = random_prompt(rng, 120);
  auto run = [&](seq_id id, float temp, uint64_t seed) {
    prefill_request r;
    r.id = id;
    r.prompt = prompt;
    r.sampling = {temp, seed};
    REQUIRE(e->prefill(r, {}).ok());
    return decode_n(*e, id, 32);
  };
  const auto a = run(1, 1.0f, 42), b = run(2, 1.0f, 42), c = run(3, 1.0f, 43), g = run(4, 0.0f, 42);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != g);
}

TEST_CASE("reference import rejects a different model") {
  auto src = make_reference();
  reference_config other;
  other.weight_seed = 99;
  auto dst = make_reference(other);
  auto chunks = prefilled_export(*src, 1, 64, 1);
  auto r = dst->import_sequence(1, chunks);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.message(), "kv chunk 0 (layer 0): model mismatch"));
  CHECK_FALSE(dst->contains(1));
}

TEST_CASE("reference import rejects mismatched layers and lengths") {
  auto src = make_reference();
  auto chunks = prefilled_export(*src, 1, 64, 2);
  auto dst = make_reference();

  SECTION("layer kind mismatch") {
    auto bad = chunks;
    bad[3].header.layer = 2; // full-attention KV claimed for a linear layer
    reseal(bad[3]);
    CHECK(contains(dst->import_sequence(1, bad).message(),
                   "kv chunk 3 (layer 2): layer kind mismatch"));
  }
  SECTION("layer count mismatch") {
    auto bad = chunks;
    bad[5].header.n_layers = 12;
    CHECK(contains(dst->import_sequence(1, bad).message(), "layer count mismatch"));
  }
  SECTION("state at a different length") {
    auto bad = chunks;
    bad[0].header.token_end = 63;
    bad[0].header.total_tokens = 64;
    CHECK(contains(dst->import_sequence(1, bad).message(), "exact length"));
  }
  SECTION("KV shorter than the sequence") {
    auto shorter = src->export_kv(1, 0, 60);
    REQUIRE(shorter.ok());
    auto bad = chunks;
    bad[3] = shorter->at(0);
    CHECK(contains(dst->import_sequence(1, bad).message(), "layer 3 KV covers [0, 60)"));
  }
  SECTION("overlapping KV") {
    auto part = src->export_kv(1, 10, 20);
    REQUIRE(part.ok());
    auto bad = chunks;
    bad.push_back(part->at(0));
    CHECK(contains(dst->import_sequence(1, bad).message(), "overlaps"));
  }
  SECTION("payload length inconsistent with range") {
    auto bad = chunks;
    bad[7].payload.resize(bad[7].payload.size() - 4);
    reseal(bad[7]);
    CHECK(contains(dst->import_sequence(1, bad).message(), "kv chunk 7 (layer 7): payload length"));
  }
  SECTION("truncated payload behind an intact header") {
    auto bad = chunks;
    bad[1].payload.pop_back();
    CHECK(contains(dst->import_sequence(1, bad).message(), "does not match header"));
  }
  SECTION("corrupted payload") {
    auto bad = chunks;
    bad[4].payload[17] ^= std::byte{4};
    CHECK(contains(dst->import_sequence(1, bad).message(),
                   "kv chunk 4 (layer 4): checksum mismatch"));
  }
  SECTION("missing layer") {
    auto bad = chunks;
    bad.erase(bad.begin() + 6);
    CHECK(contains(dst->import_sequence(1, bad).message(), "missing linear state for layer 6"));
  }
  SECTION("missing or duplicate meta") {
    auto bad = chunks;
    bad.pop_back();
    CHECK(contains(dst->import_sequence(1, bad).message(), "no meta chunk"));
    bad = chunks;
    bad.push_back(chunks.back());
    CHECK(contains(dst->import_sequence(1, bad).message(), "duplicate meta"));
  }
  SECTION("meta with an out-of-vocab token") {
    sequence_record rec;
    rec.tokens.assign(64, 5);
    rec.tokens[10] = 1000;
    rec.prompt_tokens = 64;
    auto bad = chunks;
    bad.back() = make_meta_chunk(dst->info(), rec);
    CHECK(contains(dst->import_sequence(1, bad).message(), "token 10 = 1000 outside vocab"));
  }
  CHECK_FALSE(dst->contains(1));
  // The untouched export still imports.
  CHECK(dst->import_sequence(2, chunks).ok());
}

TEST_CASE("reference import survives random wire corruption") {
  auto src = make_reference();
  auto wire = to_wire(prefilled_export(*src, 1, 100, 4));
  xoshiro256 rng(2024);
  for (int trial = 0; trial < 300; ++trial) {
    auto bad = wire;
    switch (rng.below(3)) {
    case 0:
      bad[rng.below(bad.size())] ^= static_cast<std::byte>(1 + rng.below(255));
      break;
    case 1:
      bad.resize(rng.below(bad.size()));
      break;
    default: { // splice: duplicate a random range into a random place
      const size_t a = rng.below(bad.size()), n = 1 + rng.below(64);
      std::vector<std::byte> piece(bad.begin() + a, bad.begin() + std::min(bad.size(), a + n));
      bad.insert(bad.begin() + rng.below(bad.size()), piece.begin(), piece.end());
    }
    }
    auto parsed = parse_stream(bad);
    auto dst = make_reference();
    const bool imported = parsed.ok() && dst->import_sequence(7, parsed.value()).ok();
    INFO("trial " << trial);
    CHECK_FALSE(imported);
    CHECK_FALSE(dst->contains(7));
  }
}
