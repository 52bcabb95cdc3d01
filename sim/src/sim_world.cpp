#include "prfaas/sim/sim_world.hpp"

#include <caf/all.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <caf/detail/test_actor_clock.hpp>

#include "prfaas/messages/type_ids.hpp"
#include "prfaas/runtime/log.hpp"

namespace prfaas::sim {

namespace {

/// Reads the test clock's schedule (a protected member) to see the next timer's time:
/// how far virtual time may jump without passing a horizon.
struct clock_peek : caf::detail::test_actor_clock {
  static auto schedule_ptr() { return &clock_peek::schedule_; }
};

/// `%*` in a simulated node's log pattern: virtual seconds since the run started.
class virtual_time_flag : public spdlog::custom_flag_formatter {
public:
  explicit virtual_time_flag(std::function<double()> elapsed) : elapsed_(std::move(elapsed)) {}
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    fmt::format_to(std::back_inserter(dest), "{:.3f}", elapsed_());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<virtual_time_flag>(elapsed_);
  }

private:
  std::function<double()> elapsed_;
};

} // namespace

sim_world::sim_world(const std::string& deployment_file)
    : sim_world(load_deployment(deployment_file), actor_registry::with_builtins()) {}

sim_world::sim_world(deployment_config dep, actor_registry registry)
    : dep_(std::move(dep)), registry_(std::move(registry)) {
  registry_.validate(dep_);
  init();
}

void sim_world::init() {
  cfg_.set("scheduler.policy", caf::atom("testing"));
  cfg_.add_message_types<caf::id_block::prfaas>();
  sys_ = std::make_unique<caf::actor_system>(cfg_);
  sched_ = &dynamic_cast<caf::scheduler::test_coordinator&>(sys_->scheduler());
  sim_event_queue::install(*sys_, &queue_);
  net_ = std::make_shared<sim_network>(*sys_);
  timer_ = std::make_unique<sim_timer>(*sys_);
}

sim_world::~sim_world() {
  for (auto& [_, n] : nodes_)
    n->stop();
  for (auto& n : crashed_)
    n->stop();
  queue_.clear(); // what is left would run after its actors: dropped
  timer_.reset();
  // Drain what the stopped actors left (bounded): ~actor_system waits for them.
  for (int i = 0; i < 1000000 && (sched_->has_job() || sched_->has_pending_timeout()); ++i) {
    sched_->run();
    if (sched_->has_pending_timeout())
      sched_->trigger_timeout();
  }
  sched_->run();
  nodes_.clear();
  crashed_.clear();
  sched_->run();
  queue_.clear();
  sim_event_queue::install(*sys_, nullptr);
}

void sim_world::start() {
  for (auto& n : dep_.nodes)
    restart(n.name);
  started_ = now();
}

void sim_world::crash(const std::string& name) {
  auto i = nodes_.find(name);
  if (i == nodes_.end())
    return;
  i->second->stop();
  sched_->run();
  crashed_.push_back(std::move(i->second));
  nodes_.erase(i);
}

void sim_world::restart(const std::string& name) {
  if (nodes_.count(name))
    return;
  start_node(name);
}

node& sim_world::start_node(const std::string& name, uint64_t incarnation) {
  if (incarnation == 0)
    incarnation = last_incarnation_ + 1;
  last_incarnation_ = std::max(last_incarnation_, incarnation);
  node_options opts;
  opts.sim = net_;
  opts.incarnation = incarnation;
  if (log_level_ == log_level::off) {
    opts.log = make_null_logger();
  } else {
    static auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto log = std::make_shared<spdlog::logger>(
        "node=" + name + " inc=" + std::to_string(incarnation), sink);
    auto f = std::make_unique<spdlog::pattern_formatter>();
    f->add_flag<virtual_time_flag>('*', [this] {
       return elapsed_s();
     }).set_pattern("t=%* %^%l%$ %n %v");
    log->set_formatter(std::move(f));
    log->set_level(to_spdlog(log_level_));
    opts.log = std::move(log);
  }
  opts.serve_admin = false;
  auto nd = std::make_unique<node>(*sys_, dep_, name, registry_, opts);
  nd->start();
  auto& ref = *nd;
  if (auto old = nodes_.find(name); old != nodes_.end()) { // replaced while running
    old->second->stop();
    crashed_.push_back(std::move(old->second));
  }
  nodes_[name] = std::move(nd);
  sched_->run();
  return ref;
}

bool sim_world::step(time_point until) {
  auto& clock = sched_->clock();
  auto& schedule = clock.*clock_peek::schedule_ptr();
  if (schedule.empty() && queue_.empty())
    return false;
  // The earlier of CAF's next timeout and the queue's next callback; at equal
  // instants CAF's first.
  const bool own = !queue_.empty() && (schedule.empty() || queue_.next() < schedule.begin()->first);
  const time_point next = own ? queue_.next() : schedule.begin()->first;
  if (next > until)
    return false;
  if (own) {
    clock.current_time = std::max(clock.current_time, next);
    queue_.run_next();
  } else {
    clock.trigger_timeout();
  }
  ++events_;
  return true;
}

bool sim_world::run_until(time_point until, const std::function<bool()>& stop) {
  auto& clock = sched_->clock();
  auto& schedule = clock.*clock_peek::schedule_ptr();
  for (;;) {
    sched_->run();
    if (stop && stop())
      return true;
    if (schedule.empty() && queue_.empty())
      return false;
    if (!step(until)) {
      clock.current_time = std::max(clock.current_time, until);
      return true;
    }
  }
}

void sim_world::run() {
  sched_->run();
}

void sim_world::advance(std::chrono::nanoseconds d) {
  const auto target = now() + d;
  run_until(target);
  auto& clock = sched_->clock();
  clock.current_time = std::max(clock.current_time, target);
  sched_->run();
}

void sim_world::drain() {
  const auto never = time_point::max();
  for (int i = 0; i < 100000 && (sched_->has_job() || step(never)); ++i)
    sched_->run();
  sched_->run();
}

sim_world::time_point sim_world::now() const {
  return sched_->clock().current_time;
}

double sim_world::elapsed_s() const {
  return std::chrono::duration<double>(now() - started_).count();
}

} // namespace prfaas::sim
