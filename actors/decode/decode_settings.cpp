#include "decode/decode_settings.hpp"

#include "common/engine_setup.hpp"
#include "prfaas/runtime/settings_schema.hpp"

namespace prfaas::serving {

namespace {

using S = decode_worker_settings;
using batch_settings = decode_detail::decode_batcher::settings;

const settings_schema<S>& decode_schema() {
  static const auto schema =
      settings_schema<S>{}
          .spec(profile_param())
          .spec(extra_buffer_types_param())
          .param("max_batch", param_kind::integer, &S::batch, &batch_settings::max_batch,
                 "sequences per decode step")
          .at_least(1)
          .param("max_queue", param_kind::integer, &S::batch, &batch_settings::max_queue,
                 "requests held at most (batch + waiting); more are refused")
          .param("event_steps", param_kind::integer, &S::batch, &batch_settings::event_steps,
                 "decode steps whose tokens go out in one message (first and last token at once)")
          .at_least(1)
          .param("max_early_transfers", param_kind::integer, &S::early,
                 &early_transfer_limits::max_transfers,
                 "KV transfers kept that arrived before their order; beyond, the oldest is dropped")
          .at_least(0)
          .param("max_early_bytes", param_kind::bytes, &S::early, &early_transfer_limits::max_bytes,
                 "bytes of such transfers kept at most; beyond, the oldest are dropped")
          .param("early_ttl", param_kind::duration, &S::early, &early_transfer_limits::ttl,
                 "how long such a transfer waits for its order before it is dropped")
          .param("default_budget", param_kind::duration, &S::batch, &batch_settings::default_budget,
                 "the time to its deadline of an order that gives none (orders from a gateway "
                 "always give theirs)")
          .param("sweep_interval", param_kind::duration, &S::sweep_interval,
                 "how often held requests are checked for their deadline and early transfers "
                 "for early_ttl");
  return schema;
}

} // namespace

std::vector<param_spec> decode_params() {
  return decode_schema().specs();
}

decode_worker_settings decode_settings_of(const actor_params& p) {
  return decode_schema().read(p);
}

void check_decode_params(const std::string& path, const actor_params& p) {
  if (p.integer("max_queue") < p.integer("max_batch"))
    throw config_error(path + ".max_queue", "must be at least max_batch");
}

} // namespace prfaas::serving
