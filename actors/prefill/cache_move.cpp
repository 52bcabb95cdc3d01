#include "prefill/cache_move.hpp"

#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/wire/prefill.pb.h"

namespace prfaas::serving {

cache_stream pack(const prefix_cache::exported& x) {
  cache_stream out;
  CacheBlocksMeta meta;
  for (size_t i = 0; i < x.ids.size(); ++i) {
    meta.add_block_ids(x.ids[i]);
    meta.add_kv_chunks(static_cast<uint32_t>(x.kv[i]->size()));
    for (auto& c : *x.kv[i])
      out.chunks.push_back(engine::serialize(c));
  }
  if (x.checkpoint) {
    meta.set_checkpoint_chunks(static_cast<uint32_t>(x.checkpoint->size()));
    for (auto& c : *x.checkpoint)
      out.chunks.push_back(engine::serialize(c));
  }
  out.meta = meta.SerializeAsString();
  return out;
}

std::optional<prefix_cache::exported> unpack(const received_transfer& rt, std::string& error) {
  CacheBlocksMeta meta;
  if (!meta.ParseFromString(rt.meta)) {
    error =
        "cache transfer " + std::to_string(rt.id) + " from " + rt.source + ": meta does not parse";
    return std::nullopt;
  }
  if (meta.block_ids_size() == 0 || meta.block_ids_size() != meta.kv_chunks_size() ||
      meta.checkpoint_chunks() == 0) {
    error = "cache transfer " + std::to_string(rt.id) + " from " + rt.source + ": " +
            std::to_string(meta.block_ids_size()) + " blocks, " +
            std::to_string(meta.kv_chunks_size()) + " KV chunk counts, " +
            std::to_string(meta.checkpoint_chunks()) + " checkpoint chunks";
    return std::nullopt;
  }
  size_t want = meta.checkpoint_chunks();
  for (auto n : meta.kv_chunks())
    want += n;
  if (want != rt.chunks.size()) {
    error = "cache transfer " + std::to_string(rt.id) + " from " + rt.source + ": meta announces " +
            std::to_string(want) + " chunks, " + std::to_string(rt.chunks.size()) + " arrived";
    return std::nullopt;
  }
  size_t next = 0;
  auto take = [&](uint32_t n) -> engine::payload_ptr {
    auto p = std::make_shared<engine::block_payload>();
    for (uint32_t k = 0; k < n; ++k, ++next) {
      auto c = engine::parse_chunk({rt.chunks[next]->data(), rt.chunks[next]->size()}, next);
      if (!c) {
        error =
            "cache transfer " + std::to_string(rt.id) + " from " + rt.source + ": " + c.message();
        return nullptr;
      }
      p->push_back(std::move(c).value());
    }
    return p;
  };
  prefix_cache::exported x;
  for (int i = 0; i < meta.block_ids_size(); ++i) {
    auto p = take(meta.kv_chunks(i));
    if (!p)
      return std::nullopt;
    x.ids.push_back(meta.block_ids(i));
    x.kv.push_back(std::move(p));
  }
  x.checkpoint = take(meta.checkpoint_chunks());
  if (!x.checkpoint)
    return std::nullopt;
  return x;
}

} // namespace prfaas::serving
