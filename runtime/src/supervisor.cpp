#include "prfaas/runtime/supervisor.hpp"

#include <deque>
#include <stdexcept>

#include <caf/all.hpp>

#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/probes.hpp"

namespace prfaas {

restart_policy parse_restart_policy(const std::string& text) {
  if (text == "permanent")
    return restart_policy::permanent;
  if (text == "transient")
    return restart_policy::transient;
  if (text == "temporary")
    return restart_policy::temporary;
  throw std::invalid_argument("unknown restart policy " + text);
}

namespace {

using clock_type = std::chrono::steady_clock;

struct child_entry {
  child_spec spec;
  child_status status;
};

struct supervisor_state {
  static inline const char* name = "supervisor";
  std::vector<child_entry> children;
  supervision_config cfg;
  supervisor_hooks hooks;
  metrics* m = nullptr;
  logger_ptr log;
  std::deque<clock_type::time_point> restarts; ///< within the current period
  bool stopping = false;
  caf::error exit_reason;
};

using self_ptr = caf::stateful_actor<supervisor_state>*;

child_entry* find_by_addr(self_ptr self, const caf::actor_addr& addr) {
  for (auto& c : self->state.children)
    if (c.status.handle && c.status.handle.address() == addr)
      return &c;
  return nullptr;
}

child_entry* find_by_name(self_ptr self, const std::string& name) {
  for (auto& c : self->state.children)
    if (c.spec.name == name)
      return &c;
  return nullptr;
}

/// Stops the next running child (last started first); quits when none is left.
void stop_next(self_ptr self) {
  auto& kids = self->state.children;
  for (auto i = kids.rbegin(); i != kids.rend(); ++i) {
    if (i->status.running) {
      self->send_exit(i->status.handle, caf::exit_reason::user_shutdown);
      return; // its down_msg continues the sequence
    }
  }
  self->quit(self->state.exit_reason);
}

void begin_stop(self_ptr self, caf::error reason) {
  if (self->state.stopping)
    return;
  self->state.stopping = true;
  self->state.exit_reason = std::move(reason);
  stop_next(self);
}

void escalate(self_ptr self, const child_entry& c, const caf::error& why) {
  auto& st = self->state;
  st.log->error("supervisor_escalate child={} type={} restarts={} period_ms={} reason=\"{}\"",
                c.spec.name, c.spec.type, st.restarts.size(),
                std::chrono::duration_cast<std::chrono::milliseconds>(st.cfg.period).count(),
                describe(why));
  st.m->counter("prfaas_supervisor_escalations_total", "Restart intensity exceeded").Increment();
  begin_stop(self, make_error(errc::escalated,
                              "child " + c.spec.name + " crashed more than " +
                                  std::to_string(st.cfg.intensity) + " times within " +
                                  format_duration(st.cfg.period) + "; last: " + describe(why)));
}

void on_crash(self_ptr self, child_entry& c, const caf::error& why);

void start_child(self_ptr self, child_entry& c) {
  auto& st = self->state;
  caf::actor a;
  try {
    a = c.spec.start();
  } catch (const std::exception& e) {
    st.log->error("actor_start_failed child={} type={} error=\"{}\"", c.spec.name, c.spec.type,
                  e.what());
    on_crash(self, c, make_error(errc::remote_error, e.what()));
    return;
  }
  if (!a) {
    on_crash(self, c, make_error(errc::remote_error, "factory returned no actor"));
    return;
  }
  self->monitor(a);
  c.status.handle = a;
  c.status.running = true;
  if (st.hooks.started)
    st.hooks.started(c.spec.name, a);
  st.log->info("actor_started child={} type={} restarts={}", c.spec.name, c.spec.type,
               c.status.restarts);
}

void on_crash(self_ptr self, child_entry& c, const caf::error& why) {
  auto& st = self->state;
  if (st.stopping)
    return;
  auto now = self->clock().now();
  while (!st.restarts.empty() && now - st.restarts.front() > st.cfg.period)
    st.restarts.pop_front();
  st.restarts.push_back(now);
  if (st.restarts.size() > st.cfg.intensity) {
    escalate(self, c, why);
    return;
  }
  ++c.status.restarts;
  st.m->counter("prfaas_supervisor_restarts_total", "Actor restarts", {{"actor", c.spec.name}})
      .Increment();
  probe_hit(*st.m, "supervisor.restart");
  if (st.cfg.backoff > std::chrono::nanoseconds::zero())
    self->delayed_send(self, st.cfg.backoff, restart_atom_v, c.spec.name);
  else
    start_child(self, c);
}

caf::behavior supervisor_impl(self_ptr self, std::vector<child_spec> specs, supervision_config cfg,
                              supervisor_hooks hooks, metrics* m, logger_ptr log) {
  auto& st = self->state;
  st.cfg = cfg;
  st.hooks = std::move(hooks);
  st.m = m;
  st.log = std::move(log);
  for (auto& s : specs)
    st.children.push_back({s, child_status{s.name, s.type, false, 0, {}}});
  self->set_down_handler([self](caf::down_msg& dm) {
    auto* c = find_by_addr(self, dm.source);
    if (!c)
      return;
    auto handle = c->status.handle;
    c->status.running = false;
    c->status.handle = nullptr;
    if (self->state.hooks.stopped)
      self->state.hooks.stopped(c->spec.name, handle);
    if (self->state.stopping) {
      stop_next(self);
      return;
    }
    bool crashed = dm.reason && dm.reason != caf::exit_reason::normal;
    if (crashed)
      self->state.log->warn("actor_crashed child={} type={} reason=\"{}\"", c->spec.name,
                            c->spec.type, describe(dm.reason));
    else
      self->state.log->info("actor_exited child={} type={}", c->spec.name, c->spec.type);
    switch (c->spec.restart) {
    case restart_policy::permanent:
      on_crash(self, *c, dm.reason);
      break;
    case restart_policy::transient:
      if (crashed)
        on_crash(self, *c, dm.reason);
      break;
    case restart_policy::temporary:
      break;
    }
  });
  self->set_exit_handler([self](caf::exit_msg& em) { begin_stop(self, em.reason); });
  for (auto& c : st.children) {
    if (st.stopping)
      break;
    start_child(self, c);
  }
  return {
      [self](children_atom) {
        std::vector<child_status> out;
        for (auto& c : self->state.children)
          out.push_back(c.status);
        return out;
      },
      [self](restart_atom, const std::string& name) {
        if (auto* c = find_by_name(self, name); c && !c->status.running && !self->state.stopping)
          start_child(self, *c);
      },
  };
}

} // namespace

caf::actor spawn_supervisor(caf::actor_system& sys, std::vector<child_spec> children,
                            supervision_config cfg, supervisor_hooks hooks, metrics& m,
                            logger_ptr log) {
  return sys.spawn(supervisor_impl, std::move(children), cfg, std::move(hooks), &m, std::move(log));
}

} // namespace prfaas
