#include "scheduler/link_book.hpp"

#include <algorithm>

namespace prfaas::serving {

namespace {

bool linked(const deployment_config& dep, const std::string& a, const std::string& b) {
  return dep.find_link(a, b) != nullptr;
}

bool has_link_of(const deployment_config& dep, const std::string& cluster) {
  return std::any_of(dep.link_list.begin(), dep.link_list.end(),
                     [&](const link_config& l) { return l.a == cluster || l.b == cluster; });
}

} // namespace

link_book::link_book(const deployment_config& dep, std::string own, cluster_view& v)
    : dep_(dep), own_(std::move(own)) {
  size_t pd_clusters = 0;
  for (auto& [name, c] : dep.clusters)
    pd_clusters += c.kind == "prefill-only" ? 0 : 1;
  several_pd_ = pd_clusters >= 2 && !own_.empty();
  // Whose workers: with several PD clusters, this one's own; PrfaaS clusters only over
  // a declared link, when this cluster declares any.
  const bool by_links = !own_.empty() && has_link_of(dep, own_);
  auto foreign = [&](const worker_view& w) {
    if (w.prfaas)
      return by_links && !linked(dep, w.cluster, own_);
    return several_pd_ && w.cluster != own_;
  };
  std::erase_if(v.prefill, foreign);
  std::erase_if(v.decode, foreign);
  for (auto& w : v.prefill)
    if (w.prfaas && std::none_of(v.links.begin(), v.links.end(),
                                 [&](const link_view& l) { return l.cluster == w.cluster; }))
      v.links.push_back(link_view{.cluster = w.cluster});
}

bool link_book::prfaas_cluster(const std::string& name) const {
  auto it = dep_.clusters.find(name);
  return it != dep_.clusters.end() && it->second.kind == "prefill-only";
}

bool link_book::relevant(const link::LinkState& st) const {
  return !several_pd_ || st.cluster() == own_ || st.peer_cluster() == own_;
}

bool link_book::pair_up(const std::string& prfaas) const {
  for (auto& key : down_) {
    const auto bar = key.find('|');
    const std::string a = key.substr(0, bar), b = key.substr(bar + 1);
    if ((a == prfaas || b == prfaas) && (own_.empty() || a == own_ || b == own_))
      return false;
  }
  return true;
}

bool link_book::apply(const link::LinkState& st, cluster_view& v) {
  if (!relevant(st))
    return false;
  const bool was_up = v.link_up;
  const auto key = st.cluster() + "|" + st.peer_cluster();
  if (st.state() == link::LINK_DOWN)
    down_.insert(key);
  else
    down_.erase(key);
  const std::string prfaas = prfaas_cluster(st.cluster())        ? st.cluster()
                             : prfaas_cluster(st.peer_cluster()) ? st.peer_cluster()
                                                                 : std::string{};
  auto it = std::find_if(v.links.begin(), v.links.end(),
                         [&](const link_view& l) { return l.cluster == prfaas; });
  if (it != v.links.end()) {
    it->up = pair_up(prfaas);
    // PrfaaS egress is measured by the monitor on the prefill-only side.
    if (st.cluster() == prfaas) {
      it->utilisation = st.utilisation();
      it->capacity_bps = st.capacity_bps();
      it->throughput_bps = st.throughput_bps();
      it->backlog_bytes = st.backlog_bytes();
      // Drain time at the measured rate (a link delivering nothing with a backlog is as
      // backed up as it gets); the smaller of this report's and the last one's, so it
      // takes two reports in a row.
      const double q = st.backlog_bytes() == 0 ? 0.0
                                               : static_cast<double>(st.backlog_bytes()) * 8.0 /
                                                     std::max(st.throughput_bps(), 1e3);
      it->queue_seconds = std::min(q, last_queue_[prfaas]);
      last_queue_[prfaas] = q;
    }
  }
  if (v.links.size() >= 2) {
    v.aggregate_links();
  } else {
    // One link: any relevant link reported down stops offload, as always.
    v.link_up = down_.empty();
    if (it != v.links.end() && st.cluster() == prfaas) {
      v.link_utilisation = it->utilisation;
      v.link_capacity_bps = it->capacity_bps;
      v.link_throughput_bps = it->throughput_bps;
      v.link_backlog_bytes = it->backlog_bytes;
      v.link_queue_seconds = it->queue_seconds;
    }
  }
  return was_up != v.link_up;
}

} // namespace prfaas::serving
