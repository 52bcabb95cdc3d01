#include "prefill/prefill_settings.hpp"

#include "common/engine_setup.hpp"
#include "prfaas/runtime/settings_schema.hpp"

namespace prfaas::serving {

namespace {

using S = prefill_settings;

const settings_schema<S>& prefill_schema() {
  static const auto schema =
      settings_schema<S>{}
          .spec(profile_param())
          .param("max_queue", param_kind::integer, &S::max_queue,
                 "orders waiting at most; more are refused")
          .param("cache_blocks", param_kind::integer, &S::cache_blocks,
                 "prefix cache capacity in blocks of model.block_tokens (0 = no cache)")
          .param("checkpoint_blocks", param_kind::integer, &S::checkpoint_blocks,
                 "keep the linear-attention state after every this many blocks (a prefix is "
                 "reusable up to the last one; a real model's state is megabytes, and its "
                 "prefills slice at checkpoints too)")
          .param("pull_timeout", param_kind::duration, &S::pull_timeout,
                 "how long an order waits for a cache move from another worker before "
                 "computing all")
          .param("directory", param_kind::string, &S::directory,
                 "KV directory (node/actor or a local name) told what the cache holds")
          .param("layers_per_push", param_kind::integer, &S::layers_per_push,
                 "layers whose KV chunks travel together in one data-plane message, up to "
                 "data_plane.max_chunk_bytes (1 = layer by layer; larger = fewer messages, "
                 "later first bytes)")
          .param("pool_wait", param_kind::duration, &S::pool_wait,
                 "how long a prefill waits for a free send-pool buffer (the link's "
                 "back-pressure) before building a message in fresh memory, counted");
  return schema;
}

} // namespace

std::vector<param_spec> prefill_params() {
  return prefill_schema().specs();
}

prefill_settings prefill_settings_of(const actor_params& p) {
  return prefill_schema().read(p);
}

void check_prefill_params(const std::string& path, const actor_params& p) {
  if (p.integer("max_queue") < 1)
    throw config_error(path + ".max_queue", "must be at least 1");
  if (p.integer("cache_blocks") < 0)
    throw config_error(path + ".cache_blocks", "must not be negative");
  if (p.integer("checkpoint_blocks") < 1 || p.integer("checkpoint_blocks") > 65536)
    throw config_error(path + ".checkpoint_blocks", "must be between 1 and 65536");
  if (p.integer("layers_per_push") < 1 || p.integer("layers_per_push") > 4096)
    throw config_error(path + ".layers_per_push", "must be between 1 and 4096");
  if (p.dur("pool_wait") < duration{0})
    throw config_error(path + ".pool_wait", "must not be negative");
}

} // namespace prfaas::serving
