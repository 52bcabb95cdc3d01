#include "scheduler/policy.hpp"

#include <algorithm>
#include <stdexcept>

namespace prfaas::serving {

policy_registry& policy_registry::instance() {
  static policy_registry r;
  return r;
}

bool policy_registry::add(const std::string& name, policy_factory f) {
  if (!factories_.emplace(name, std::move(f)).second)
    throw std::invalid_argument("routing policy \"" + name + "\" registered twice");
  return true;
}

std::unique_ptr<routing_policy> policy_registry::make(const std::string& name,
                                                      const actor_params& p) const {
  auto it = factories_.find(name);
  if (it == factories_.end())
    return nullptr;
  return it->second(p);
}

std::vector<std::string> policy_registry::names() const {
  std::vector<std::string> out;
  for (auto& [n, f] : factories_)
    out.push_back(n);
  return out;
}

bool cluster_view::offload_open(const worker_view& w) const {
  const link_view* l = link_of(w);
  if (l == nullptr)
    return true;
  if (!l->up)
    return false;
  if (!l->over_budget(link_budget_horizon))
    return true;
  for (auto& o : links)
    if (o.up && !o.over_budget(link_budget_horizon))
      return false;
  return true;
}

void cluster_view::aggregate_links() {
  if (links.size() == 1) {
    auto& l = links.front();
    link_up = l.up;
    link_utilisation = l.utilisation;
    link_capacity_bps = l.capacity_bps;
    link_throughput_bps = l.throughput_bps;
    link_backlog_bytes = l.backlog_bytes;
    link_queue_seconds = l.queue_seconds;
    return;
  }
  if (links.empty())
    return;
  // The up links together: summed rates and backlog, utilisation weighted by rate, and
  // the drain time of the best link (where new work would go).
  link_up = false;
  link_capacity_bps = link_throughput_bps = 0;
  link_backlog_bytes = 0;
  double carried = 0, queue = 0;
  for (auto& l : links) {
    if (!l.up)
      continue;
    queue = link_up ? std::min(queue, l.queue_seconds) : l.queue_seconds;
    link_up = true;
    link_capacity_bps += l.capacity_bps;
    link_throughput_bps += l.throughput_bps;
    link_backlog_bytes += l.backlog_bytes;
    carried += l.utilisation * l.capacity_bps;
  }
  link_utilisation = link_capacity_bps > 0 ? carried / link_capacity_bps : 0;
  link_queue_seconds = queue;
}

int least_loaded_prefill(const cluster_view& v, bool prfaas_side,
                         const std::vector<std::string>& exclude) {
  int best = -1;
  for (size_t i = 0; i < v.prefill.size(); ++i) {
    auto& w = v.prefill[i];
    if (!w.routable() || w.prfaas != prfaas_side || !v.offload_open(w))
      continue;
    if (std::find(exclude.begin(), exclude.end(), w.addr.node) != exclude.end())
      continue;
    // Least pending work; ties go to the shortest queue, then the first listed.
    if (best < 0 || w.pending_tokens() < v.prefill[best].pending_tokens() ||
        (w.pending_tokens() == v.prefill[best].pending_tokens() &&
         w.queue + w.assigned < v.prefill[best].queue + v.prefill[best].assigned))
      best = static_cast<int>(i);
  }
  return best;
}

int least_loaded_decode(const cluster_view& v, const std::string& node, const std::string& actor,
                        const std::vector<std::string>& exclude) {
  int best = -1;
  double best_load = 0;
  for (size_t i = 0; i < v.decode.size(); ++i) {
    auto& w = v.decode[i];
    // A request kept on its decode worker (failover) is existing work: a worker that
    // drains toward prefill still finishes it.
    if (!w.up || w.starting || (node.empty() && !w.enabled))
      continue;
    if (!node.empty() && (w.addr.node != node || w.addr.actor != actor))
      continue;
    if (std::find(exclude.begin(), exclude.end(), w.addr.node) != exclude.end())
      continue;
    double load = static_cast<double>(w.occupancy()) / std::max<uint32_t>(1, w.capacity);
    if (best < 0 || load < best_load) {
      best = static_cast<int>(i);
      best_load = load;
    }
  }
  return best;
}

namespace {

/// `threshold`: the fixed length threshold of the serving-path issue. Offload to the
/// PrfaaS cluster iff the prompt is longer than `threshold` tokens and the link is
/// up; everything else (and every failover) prefills in the PD cluster. Prefill and
/// decode workers are chosen least-loaded. (Cache-aware and bandwidth-aware policies
/// build on the same view.)
class threshold_policy final : public routing_policy {
public:
  explicit threshold_policy(uint64_t t) : threshold_(t) {}
  std::string name() const override { return "threshold"; }

  route_choice decide(const route_input& in, const cluster_view& v) override {
    route_choice c;
    c.threshold = threshold_;
    c.uncached_tokens = in.prompt_tokens;
    c.decode = least_loaded_decode(v, in.decode_node, in.decode_actor, in.exclude_decode_nodes);
    if (c.decode < 0) {
      c.why_not = in.decode_node.empty()
                      ? "no decode worker is up and ready"
                      : "decode worker " + in.decode_node + "/" + in.decode_actor + " is not up";
      return c;
    }
    bool offload = !in.local_only && v.link_up && in.prompt_tokens > threshold_;
    if (offload)
      c.prefill = least_loaded_prefill(v, true, in.exclude_nodes);
    if (c.prefill >= 0) {
      c.route = "prfaas";
      return c;
    }
    c.prefill = least_loaded_prefill(v, false, in.exclude_nodes);
    if (c.prefill < 0 && !in.local_only) // no PD prefill left: PrfaaS even for short ones
      c.prefill = v.link_up ? least_loaded_prefill(v, true, in.exclude_nodes) : -1;
    if (c.prefill < 0) {
      c.why_not = "no prefill worker is up";
      c.decode = -1;
      return c;
    }
    c.route = v.prefill[c.prefill].prfaas ? "prfaas" : "pd";
    return c;
  }

private:
  uint64_t threshold_;
};

PRFAAS_REGISTER_POLICY("threshold", [](const actor_params& p) -> std::unique_ptr<routing_policy> {
  return std::make_unique<threshold_policy>(static_cast<uint64_t>(p.integer("threshold")));
});

} // namespace

} // namespace prfaas::serving
