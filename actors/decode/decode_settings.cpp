#include "decode/decode_settings.hpp"

#include "common/engine_setup.hpp"

namespace prfaas::serving {

std::vector<param_spec> decode_params() {
  return {profile_param(),
          {"max_batch", param_kind::integer, "16", "sequences per decode step"},
          {"max_queue", param_kind::integer, "256",
           "requests held at most (batch + waiting); more are refused"},
          {"event_steps", param_kind::integer, "1",
           "decode steps whose tokens go out in one message (first and last token at once)"},
          {"max_early_transfers", param_kind::integer, "64",
           "KV transfers kept that arrived before their order; beyond, the oldest is dropped"},
          {"max_early_bytes", param_kind::bytes, "1GiB",
           "bytes of such transfers kept at most; beyond, the oldest are dropped"},
          {"early_ttl", param_kind::duration, "30s",
           "how long such a transfer waits for its order before it is dropped"}};
}

void check_decode_params(const std::string& path, const actor_params& p) {
  if (p.integer("max_batch") < 1)
    throw config_error(path + ".max_batch", "must be at least 1");
  if (p.integer("event_steps") < 1)
    throw config_error(path + ".event_steps", "must be at least 1");
  if (p.integer("max_queue") < p.integer("max_batch"))
    throw config_error(path + ".max_queue", "must be at least max_batch");
  if (p.integer("max_early_transfers") < 0)
    throw config_error(path + ".max_early_transfers", "must not be negative");
}

} // namespace prfaas::serving
