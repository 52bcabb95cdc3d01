#include "prefill/queue_view.hpp"

namespace prfaas::serving {

uint64_t work_of(const PrefillOrder& po) {
  const uint64_t n = static_cast<uint64_t>(po.prompt_size());
  return po.uncached_tokens() > 0 && po.uncached_tokens() <= n ? po.uncached_tokens() : n;
}

prefill_queue::order queue_order(const deployment_config& dep, const std::string& own,
                                 const PrefillOrder& po, prefill_queue::clock_type::time_point now,
                                 std::chrono::nanoseconds budget, bool pull_first) {
  const auto origin = fair_share_of(dep, own, po.decode_node());
  return {.request_id = po.request_id(),
          .transfer_id = po.transfer_id(),
          .work = work_of(po),
          .deadline = now + budget,
          .budget = std::chrono::nanoseconds(po.budget_ns()),
          .pull_first = pull_first,
          .origin = origin.cluster,
          .weight = origin.weight};
}

WorkerLoad load_of(const prefill_queue& q, bool ready, const deployment_config& dep,
                   const std::string& own) {
  WorkerLoad l;
  l.set_role("prefill");
  l.set_queue_depth(static_cast<uint32_t>(q.queued()));
  l.set_active(static_cast<uint32_t>(q.running()));
  l.set_capacity(static_cast<uint32_t>(q.max_queue()));
  l.set_queued_tokens(q.queued_tokens());
  l.set_tokens_per_s(q.tokens_per_s());
  for (auto& r : q.recent()) {
    auto* p = l.add_recent_prefills();
    p->set_tokens(r.tokens);
    p->set_seconds(r.seconds);
  }
  l.set_load(static_cast<double>(q.queued() + q.running()) / q.max_queue());
  l.set_starting(!ready);
  // Under fair queueing each PD cluster waits behind its weight, not the whole queue.
  if (dep.fair_queueing())
    for (auto& [name, c] : dep.clusters)
      if (c.kind == "pd")
        (*l.mutable_queued_tokens_ahead())[name] =
            q.work_ahead({.origin = name, .weight = dep.fair_weight(own, name)});
  return l;
}

} // namespace prfaas::serving
