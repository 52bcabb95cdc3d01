// Prefix reuse through the hybrid pool: KV blocks + the linear-state checkpoint at the
// block boundary give exactly the tokens of a prefill from scratch.
#include "engine_test_util.hpp"

#include "prfaas/engine/block_hash.hpp"
#include "prfaas/engine/block_pool.hpp"

using namespace prfaas::engine;
using namespace prfaas::engine::test;

namespace {

/// What a prefill worker does after a prefill: publish every full block's KV and the
/// checkpoint after it into the pool.
void publish(block_pool& pool, const engine& e, seq_id id, const std::vector<block_id>& ids,
             uint32_t block) {
  for (uint32_t i = 0; i < ids.size(); ++i) {
    auto kv = e.export_kv(id, i * block, (i + 1) * block);
    REQUIRE(kv.ok());
    std::optional<block_id> parent;
    if (i > 0)
      parent = ids[i - 1];
    REQUIRE(
        pool.insert_kv(ids[i], parent, std::make_shared<const block_payload>(std::move(kv).value()))
            .ok());
    auto cp = e.export_checkpoint(id, (i + 1) * block);
    REQUIRE(cp.ok());
    REQUIRE(
        pool.insert_checkpoint(ids[i], std::make_shared<const block_payload>(std::move(cp).value()))
            .ok());
  }
}

} // namespace

TEST_CASE("prefix reuse from the pool equals prefill from scratch") {
  xoshiro256 rng(77);
  for (uint32_t block : {16u, 32u, 128u}) {
    for (int i = 0; i < 4; ++i) {
      auto producer = make_reference(), reuser = make_reference(), scratch = make_reference();
      block_hasher hasher(block);
      block_pool pool({/*capacity_blocks=*/4096, 0, 1});
      const auto base = random_prompt(rng, block * (2 + rng.below(12)) + rng.below(block));
      prefill_request r;
      r.id = 1;
      r.prompt = base;
      r.checkpoint_interval = block;
      REQUIRE(producer->prefill(r, {}).ok());
      const auto base_ids = hasher.hash(base);
      publish(pool, *producer, 1, base_ids, block);

      // A new prompt sharing the first k blocks (and maybe part of the next).
      const size_t k = 1 + rng.below(base_ids.size());
      const size_t keep = std::min(base.size(), k * block + rng.below(block));
      auto prompt = std::vector<token>(base.begin(), base.begin() + static_cast<long>(keep));
      const auto tail = random_prompt(rng, 1 + rng.below(300));
      prompt.insert(prompt.end(), tail.begin(), tail.end());
      const auto ids = hasher.hash(prompt);
      const prefix_match m = pool.match(ids);
      INFO("block " << block << " case " << i << " shared " << k << " matched " << m.kv_blocks);
      REQUIRE(m.kv_blocks >= k);
      REQUIRE(m.reuse_blocks == m.kv_blocks);
      uint32_t reuse_blocks = m.reuse_blocks;
      if (reuse_blocks * block >= prompt.size())
        --reuse_blocks; // at least one token must be computed
      REQUIRE(pool.acquire_prefix(ids, reuse_blocks).ok());
      auto reuse = pool.collect_reuse(ids, reuse_blocks);
      REQUIRE(reuse.ok());

      prefill_request a;
      a.id = 2;
      a.prompt = prompt;
      a.reuse = reuse.value();
      a.reuse_tokens = reuse_blocks * block;
      a.sampling = {0.7f, 5};
      auto ra = reuser->prefill(a, {});
      INFO((ra.ok() ? std::string() : ra.message()));
      REQUIRE(ra.ok());
      CHECK(ra->computed_tokens == prompt.size() - reuse_blocks * block);
      pool.release_prefix(ids, reuse_blocks);

      prefill_request b;
      b.id = 2;
      b.prompt = prompt;
      b.sampling = {0.7f, 5};
      auto rb = scratch->prefill(b, {});
      REQUIRE(rb.ok());
      CHECK(ra->first_token == rb->first_token);
      CHECK(decode_n(*reuser, 2, 64) == decode_n(*scratch, 2, 64));
      CHECK(to_wire(reuser->export_sequence(2).value()) ==
            to_wire(scratch->export_sequence(2).value()));
    }
  }
}

TEST_CASE("prefix reuse rejects state saved at another length") {
  auto e = make_reference();
  xoshiro256 rng(5);
  const auto prompt = random_prompt(rng, 100);
  prefill_request r;
  r.id = 1;
  r.prompt = prompt;
  r.checkpoint_interval = 16;
  REQUIRE(e->prefill(r, {}).ok());
  CHECK(contains(e->export_checkpoint(1, 40).message(), "no linear-state checkpoint at 40"));
  auto kv = e->export_kv(1, 0, 48).value();
  auto cp32 = e->export_checkpoint(1, 32).value();
  std::vector<kv_chunk> reuse = kv;
  reuse.insert(reuse.end(), cp32.begin(), cp32.end());
  auto f = make_reference();
  prefill_request a;
  a.id = 2;
  a.prompt = prompt;
  a.reuse = reuse;
  a.reuse_tokens = 48; // KV covers 48 tokens but the state is from 32
  auto res = f->prefill(a, {});
  REQUIRE_FALSE(res.ok());
  CHECK(contains(res.message(), "reuse rejected"));
  CHECK(contains(res.message(), "exact length"));
  CHECK_FALSE(f->contains(2));
  // A meta chunk has no place in a prefix.
  reuse = e->export_kv(1, 0, 32).value();
  reuse.insert(reuse.end(), cp32.begin(), cp32.end());
  reuse.push_back(e->export_sequence(1).value().back());
  a.reuse = reuse;
  a.reuse_tokens = 32;
  CHECK(contains(f->prefill(a, {}).message(), "unexpected meta chunk"));
}
