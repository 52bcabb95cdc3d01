#include "engine_test_util.hpp"

#include "prfaas/engine/profile_engine.hpp"

using namespace prfaas::engine;
using namespace prfaas::engine::test;

namespace {

profile load(const std::string& file) {
  auto p = load_profile(std::string(PRFAAS_SOURCE_DIR) + "/configs/profiles/" + file);
  REQUIRE(p.ok());
  return std::move(p).value();
}

std::unique_ptr<profile_engine> make(const std::string& file, prfaas::engine::clock& clk,
                                     double scale = 1.0 / 1024) {
  profile_engine_config c;
  c.kv_scale = scale;
  c.seed = 3;
  auto e = profile_engine::create(load(file), c, clk);
  REQUIRE(e.ok());
  return std::move(e).value();
}

std::vector<token> synthetic_prompt(size_t n, uint64_t seed) {
  xoshiro256 rng(seed);
  std::vector<token> p(n);
  for (auto& t : p)
    t = static_cast<token>(rng.below(100000));
  return p;
}

} // namespace

TEST_CASE("profile engine buffers have the profiled size") {
  manual_clock clk;
  auto e = make("kimi-linear-1t-h200.yaml", clk);
  CHECK(e->info().n_layers() == 64);
  CHECK(e->info().n_full() == 16);
  for (uint64_t n : {1024, 8192}) {
    const auto prompt = synthetic_prompt(n, n);
    prefill_request r;
    r.id = n;
    r.prompt = prompt;
    REQUIRE(e->prefill(r, {}).ok());
    auto x = e->export_sequence(n);
    REQUIRE(x.ok());
    uint64_t bytes = 0;
    for (const auto& c : *x)
      if (c.header.kind != layer_kind::meta)
        bytes += c.payload.size();
    INFO("tokens " << n);
    CHECK(bytes == e->buffer_bytes(n));
    const double want = e->kv_bytes(n) / 1024;
    CHECK(static_cast<double>(bytes) <= want);
    CHECK(static_cast<double>(bytes) > want - 64); // each layer rounds down < 1 byte
  }
}

TEST_CASE("profile engine spends modeled time on the injected clock") {
  manual_clock clk;
  auto e = make("kimi-linear-1t-h200.yaml", clk);
  const auto prompt = synthetic_prompt(32768, 1);
  std::vector<nanos> at;
  prefill_request r;
  r.id = 1;
  r.prompt = prompt;
  auto res = e->prefill(r, [&](kv_chunk&&) { at.push_back(clk.now()); });
  REQUIRE(res.ok());
  REQUIRE(at.size() == 65);
  // Layer l's chunk arrives when l+1 of 64 slices of T_prefill(32K) = 1.84 s have passed.
  CHECK(std::abs(std::chrono::duration<double>(at[0]).count() - 1.84 / 64) < 1e-6);
  CHECK(std::abs(std::chrono::duration<double>(at[63]).count() - 1.84) < 1e-6);
  CHECK(std::abs(std::chrono::duration<double>(res->modeled_time).count() - 1.84) < 1e-6);
  const nanos before = clk.now();
  const seq_id batch[1] = {1};
  REQUIRE(e->decode_step(batch).ok());
  CHECK(clk.now() - before == std::chrono::duration_cast<nanos>(
                                  std::chrono::duration<double>(e->decode_seconds(1, 32768))));
  // Report-only mode leaves the clock alone.
  profile_engine_config quiet;
  quiet.kv_scale = 1.0 / 4096;
  quiet.sleep = false;
  auto q = profile_engine::create(load("kimi-linear-1t-h200.yaml"), quiet, clk).value();
  const nanos t0 = clk.now();
  r.id = 2;
  REQUIRE(q->prefill(r, {}).ok());
  CHECK(clk.now() == t0);
}

TEST_CASE("profile engine transfer from H200 prefill to H20 decode is exact") {
  manual_clock clk;
  auto h200 = make("kimi-linear-1t-h200.yaml", clk);
  auto h20 = make("kimi-linear-1t-h20.yaml", clk);
  auto single = make("kimi-linear-1t-h200.yaml", clk);
  CHECK(h200->info().fingerprint == h20->info().fingerprint);
  const auto prompt = synthetic_prompt(3000, 9);
  prefill_request r;
  r.id = 4;
  r.prompt = prompt;
  r.sampling = {1.0f, 8};
  REQUIRE(h200->prefill(r, {}).ok());
  REQUIRE(single->prefill(r, {}).ok());
  auto parsed = parse_stream(to_wire(h200->export_sequence(4).value()));
  REQUIRE(parsed.ok());
  REQUIRE(h20->import_sequence(4, *parsed).ok());
  CHECK(decode_n(*h20, 4, 64) == decode_n(*single, 4, 64));
  CHECK(to_wire(h20->export_sequence(4).value()) == to_wire(single->export_sequence(4).value()));
}

TEST_CASE("profile engine rejects well formed chunks of another sequence") {
  manual_clock clk;
  auto e = make("kimi-linear-1t-h200.yaml", clk, 1.0 / 65536);
  const auto a = synthetic_prompt(500, 1), b = synthetic_prompt(500, 2);
  prefill_request r;
  r.id = 1;
  r.prompt = a;
  REQUIRE(e->prefill(r, {}).ok());
  r.id = 2;
  r.prompt = b;
  REQUIRE(e->prefill(r, {}).ok());
  auto xa = e->export_sequence(1).value();
  auto xb = e->export_sequence(2).value();
  xa.back() = xb.back(); // A's KV with B's tokens
  auto dst = make("kimi-linear-1t-h20.yaml", clk, 1.0 / 65536);
  auto res = dst->import_sequence(1, xa);
  REQUIRE_FALSE(res.ok());
  CHECK(contains(res.message(), "content does not match"));
  // A different kv_scale is a different layout: rejected as another model.
  auto other = make("kimi-linear-1t-h20.yaml", clk, 1.0 / 1024);
  CHECK(contains(other->import_sequence(2, xb).message(), "model mismatch"));
  CHECK(dst->import_sequence(2, xb).ok());
}

TEST_CASE("profile engine prefix reuse matches prefill from scratch") {
  manual_clock clk;
  auto e = make("kimi-linear-1t-h200.yaml", clk, 1.0 / 65536);
  const auto prompt = synthetic_prompt(2000, 5);
  prefill_request r;
  r.id = 1;
  r.prompt = prompt;
  REQUIRE(e->prefill(r, {}).ok());
  auto reuse = e->export_kv(1, 0, 1024).value();
  auto cp = e->export_checkpoint(1, 1024).value();
  reuse.insert(reuse.end(), cp.begin(), cp.end());
  auto f = make("kimi-linear-1t-h20.yaml", clk, 1.0 / 65536);
  prefill_request a = r;
  a.id = 2;
  a.reuse = reuse;
  a.reuse_tokens = 1024;
  auto ra = f->prefill(a, {});
  REQUIRE(ra.ok());
  CHECK(ra->computed_tokens == 976);
  CHECK(std::chrono::duration<double>(ra->modeled_time).count() == Approx(f->prefill_seconds(976)));
  CHECK(to_wire(f->export_sequence(2).value()) == to_wire(e->export_sequence(1).value()));
  // Reusing the wrong prompt's prefix is caught by content verification.
  const auto other = synthetic_prompt(2000, 6);
  a.id = 3;
  a.prompt = other;
  CHECK(contains(f->prefill(a, {}).message(), "content does not match"));
}

TEST_CASE("profile engine refuses phi-only profiles and bad scales") {
  manual_clock clk;
  auto r = profile_engine::create(load("mimo-v2-flash-h200.yaml"), {}, clk);
  CHECK(contains(r.message(), "phi-only"));
  profile_engine_config c;
  c.kv_scale = 0;
  CHECK_FALSE(profile_engine::create(load("kimi-linear-1t-h200.yaml"), c, clk).ok());
}

TEST_CASE("profile engine without synthesized content: same chunk sizes, zero bytes, same tokens") {
  manual_clock clk;
  auto tokens_engine = make("kimi-linear-1t-h200.yaml", clk);
  profile_engine_config c;
  c.kv_scale = 1.0 / 1024;
  c.seed = 3;
  c.synthesize_content = false;
  c.verify_content = false;
  auto zeros = profile_engine::create(load("kimi-linear-1t-h200.yaml"), c, clk);
  REQUIRE(zeros.ok());
  auto& z = *zeros.value();

  const auto prompt = synthetic_prompt(3000, 7);
  prefill_request r;
  r.id = 1;
  r.prompt = prompt;
  auto pa = tokens_engine->prefill(r, {});
  auto pb = z.prefill(r, {});
  REQUIRE(pa.ok());
  REQUIRE(pb.ok());
  CHECK(pa->first_token == pb->first_token); // this engine keeps only the last digest
  auto a = tokens_engine->export_sequence(1);
  auto b = z.export_sequence(1);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->size() == b->size());
  size_t nonzero_in_tokens = 0;
  for (size_t i = 0; i < a->size(); ++i) {
    INFO("chunk " << i);
    CHECK((*a)[i].header.kind == (*b)[i].header.kind);
    CHECK((*a)[i].payload.size() == (*b)[i].payload.size());
    if ((*b)[i].header.kind == layer_kind::meta)
      continue;
    for (auto byte : (*b)[i].payload)
      REQUIRE(byte == std::byte{0});
    for (auto byte : (*a)[i].payload)
      nonzero_in_tokens += byte != std::byte{0};
  }
  CHECK(nonzero_in_tokens > 0); // the default engine does write content

  // The zero chunks import into another such engine, and decoding there gives the
  // tokens the default engine gives: tokens come from the sequence, not the bytes.
  auto other = profile_engine::create(load("kimi-linear-1t-h200.yaml"), c, clk);
  REQUIRE(other.ok());
  REQUIRE(other.value()->import_sequence(1, *b).ok());
  const seq_id batch[1] = {1};
  for (int step = 0; step < 4; ++step) {
    auto want = tokens_engine->decode_step(batch);
    auto got = other.value()->decode_step(batch);
    REQUIRE(want.ok());
    REQUIRE(got.ok());
    CHECK(*want == *got);
  }

  c.verify_content = true; // nothing to verify against
  CHECK_FALSE(profile_engine::create(load("kimi-linear-1t-h200.yaml"), c, clk).ok());
}
