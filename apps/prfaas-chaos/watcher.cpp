#include "watcher.hpp"

#include "probe.hpp"
#include "common/http_probe.hpp"

namespace prfaas::chaos {

namespace {

using namespace std::chrono_literals;

constexpr auto poll_every = 50ms;
/// How long to keep looking for detection after the fault ended, and for recovery.
constexpr auto patience = 30s;
// How long after a fault is undone a detection may still be its own: the failure
// detector's 1 s plus a heartbeat or two. Later, another fault is the likelier cause.
constexpr auto late_detection = 3s;

double since(clock_type::time_point from, clock_type::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

} // namespace

watcher::watcher(const topology& t, const fault_spec& f) : topo_(t), f_(f) {
  auto watch = [&](const std::string& observer, const std::string& watched) {
    pair_watch p{observer, watched, 0};
    if (auto h = get_health(topo_.place(observer)))
      if (auto v = peer_in(*h, watched))
        p.baseline = v->incarnation;
    pairs_.push_back(p);
  };
  switch (f.kind) {
  case fault_kind::kill:
  case fault_kind::pause:
    for (auto& n : topo_.nodes())
      if (n != f.node)
        watch(n, f.node);
    break;
  case fault_kind::blackhole:
    for (auto& to : f.to) {
      watch(to, f.from);
      if (f.both_ways)
        watch(f.from, to);
    }
    break;
  case fault_kind::link_down:
    gauges_ = topo_.scheduler_nodes();
    metric_ = "prfaas_scheduler_link_up";
    faulty_value_ = 0, healthy_value_ = 1;
    break; // one link of several: watch_one_link, on the watcher's thread
  case fault_kind::rate:
    gauges_ = topo_.scheduler_nodes();
    metric_ = "prfaas_scheduler_bandwidth_scarce";
    faulty_value_ = 1, healthy_value_ = 0;
    break;
  case fault_kind::fault_point:
    break; // message loss is retried, not detected: judged by the invariants alone
  }
  thread_ = std::thread{[this] { run(); }};
}

watcher::~watcher() {
  stop_ = true;
  if (thread_.joinable())
    thread_.join();
}

void watcher::applied(clock_type::time_point at) {
  std::lock_guard g{mu_};
  applied_ = at;
}

void watcher::undone(clock_type::time_point at) {
  std::lock_guard g{mu_};
  undone_ = at;
}

void watcher::held_until(clock_type::time_point at, const std::string& by) {
  std::lock_guard g{mu_};
  if (!undone_ || result_.recovered_s || at <= *undone_)
    return;
  held_until_ = at;
  result_.held_s = since(*undone_, at);
  result_.held_by = by;
}

void watcher::finish(std::chrono::milliseconds limit) {
  auto until = clock_type::now() + limit;
  while (!done_ && clock_type::now() < until)
    std::this_thread::sleep_for(poll_every);
  stop_ = true;
  if (thread_.joinable())
    thread_.join();
}

detection watcher::result() const {
  std::lock_guard g{mu_};
  return result_;
}

watcher::verdict watcher::poll_pair(const pair_watch& p) const {
  auto h = get_health(topo_.place(p.observer));
  if (!h)
    return verdict::unknown; // the observer is down, paused or cut off itself
  auto v = peer_in(*h, p.watched);
  if (!v)
    return verdict::unknown;
  if (v->state == "suspect" || v->state == "down")
    return verdict::faulty;
  // A killed node is back only as a new incarnation.
  if (v->state == "up" && (f_.kind != fault_kind::kill || v->incarnation != p.baseline))
    return verdict::healthy;
  return verdict::unknown;
}

watcher::verdict watcher::poll_gauge(const std::string& node) const {
  auto m = get_metrics(topo_.place(node));
  if (!m || m->find(metric_) == std::string::npos)
    return verdict::unknown;
  double v = proc::metric(*m, metric_, labels_);
  return v == faulty_value_    ? verdict::faulty
         : v == healthy_value_ ? verdict::healthy
                               : verdict::unknown;
}

std::map<std::string, std::pair<double, double>>
watcher::routes_by_link(const std::string& pd) const {
  std::map<std::string, std::pair<double, double>> out;
  const auto& dep = topo_.deployment();
  for (auto& [name, c] : dep.clusters)
    if (auto* l = dep.find_link(name, pd); l && c.kind == "prefill-only") {
      double sum = 0;
      for (auto& n : gauges_)
        if (auto m = get_metrics(topo_.place(n)))
          sum += proc::metric(*m, "prfaas_scheduler_cluster_routes_total",
                              {"prfaas_cluster=\"" + name + "\""});
      out[name] = {sum, static_cast<double>(l->rate_bps)};
    }
  return out;
}

std::optional<double> watcher::routes_across() const {
  double sum = 0;
  for (auto& n : gauges_) {
    auto m = get_metrics(topo_.place(n));
    if (!m)
      return std::nullopt;
    sum += proc::metric(*m, "prfaas_scheduler_cluster_routes_total",
                        {"prfaas_cluster=\"" + across_ + "\""});
  }
  return sum;
}

void watcher::watch_one_link() {
  // A scheduler with links to several PrfaaS clusters keeps offloading over the others
  // (its link_up stays 1): watch the downed link's own gauge, and what was routed where.
  for (auto& end : f_.link)
    if (auto c = topo_.deployment().clusters.find(end);
        c != topo_.deployment().clusters.end() && c->second.kind == "prefill-only")
      for (auto& n : gauges_)
        if (auto m = get_metrics(topo_.place(n));
            m && m->find("prfaas_scheduler_cluster_link_up") != std::string::npos) {
          metric_ = "prfaas_scheduler_cluster_link_up";
          labels_ = {"prfaas_cluster=\"" + end + "\""};
          across_ = end;
          auto before = routes_by_link(end == f_.link[0] ? f_.link[1] : f_.link[0]);
          std::lock_guard g{mu_};
          result_.routes_before = std::move(before);
        }
}

void watcher::run() {
  // Here, not in the constructor: the fault's timeline must not wait on a node's HTTP.
  if (f_.kind == fault_kind::link_down)
    watch_one_link();
  std::vector<std::string> observers;
  for (auto& p : pairs_)
    observers.push_back(p.observer);
  for (auto& g : gauges_)
    observers.push_back(g);
  while (!stop_) {
    std::optional<clock_type::time_point> applied, undone, held;
    bool detected, recovered;
    {
      std::lock_guard g{mu_};
      applied = applied_, undone = undone_, held = held_until_;
      detected = result_.detected_s.has_value();
      recovered = result_.recovered_s.has_value();
    }
    if (!applied) {
      std::this_thread::sleep_for(poll_every / 5);
      continue;
    }
    // Every observer's view, each stamped with the moment it was read.
    size_t healthy = 0, asked = 0;
    std::optional<std::pair<clock_type::time_point, std::string>> first_faulty;
    for (size_t i = 0; i < observers.size(); ++i) {
      auto v = i < pairs_.size() ? poll_pair(pairs_[i]) : poll_gauge(observers[i]);
      auto now = clock_type::now();
      ++asked;
      if (v == verdict::faulty && !first_faulty)
        first_faulty = {now, observers[i]};
      healthy += v == verdict::healthy ? 1 : 0;
    }
    auto now = clock_type::now();
    {
      std::lock_guard g{mu_};
      if (!detected && first_faulty &&
          (!undone || first_faulty->first - *undone <= late_detection)) {
        result_.detected_s = since(*applied, first_faulty->first);
        result_.detected_by = first_faulty->second;
        detected = true;
        if (!across_.empty())
          routes_at_detection_ = routes_across();
      }
      // The fault is over: what went across it since it was detected.
      if (undone && routes_at_detection_ && !result_.routed_across)
        if (auto r = routes_across())
          result_.routed_across = *r - *routes_at_detection_;
      // Recovered: the fault is over and every observer sees the deployment whole.
      if (undone && detected && !recovered && healthy == asked && asked > 0) {
        result_.recovered_s = std::max(0.0, since(held_until_.value_or(*undone), now));
        recovered = true;
      }
    }
    bool no_more_to_see = recovered || (undone && now - held.value_or(*undone) > patience) ||
                          (!f_.ends() && detected);
    if (no_more_to_see) {
      done_ = true;
      return;
    }
    std::this_thread::sleep_until(now + poll_every);
  }
  done_ = true;
}

} // namespace prfaas::chaos
