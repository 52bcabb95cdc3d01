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
          .spec(extra_buffer_types_param())
          .param("max_queue", param_kind::integer, &S::max_queue,
                 "orders waiting at most; more are refused")
          .at_least(1)
          .param("cache_blocks", param_kind::integer, &S::cache_blocks,
                 "prefix cache capacity in blocks of model.block_tokens (0 = no cache)")
          .at_least(0)
          .param("checkpoint_blocks", param_kind::integer, &S::checkpoint_blocks,
                 "keep the linear-attention state after every this many blocks (a prefix is "
                 "reusable up to the last one; a real model's state is megabytes, and its "
                 "prefills slice at checkpoints too)")
          .between(1, 65536)
          .param("max_batch", param_kind::integer, &S::max_batch,
                 "queued prompts prefilled together in one engine call, where the engine "
                 "gains from it (llama: that many sequences of model.llama.context tokens in "
                 "its context, and their uncached tokens at most model.llama.batch in all; a "
                 "longer prompt runs alone); 1 = one at a time")
          .between(1, 256)
          .param("pull_timeout", param_kind::duration, &S::pull_timeout,
                 "how long an order waits for a cache move from another worker before "
                 "computing all")
          .param("directory", param_kind::string, &S::directory,
                 "KV directory (node/actor or a local name) told what the cache holds")
          .param("layers_per_push", param_kind::integer, &S::layers_per_push,
                 "layers whose KV chunks travel together in one data-plane message, up to "
                 "data_plane.max_chunk_bytes (1 = layer by layer; larger = fewer messages, "
                 "later first bytes)")
          .between(1, 4096)
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
  if (p.dur("pool_wait") < duration{0})
    throw config_error(path + ".pool_wait", "must not be negative");
}

} // namespace prfaas::serving
