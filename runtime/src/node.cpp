#include "prfaas/runtime/node.hpp"

#include <sstream>

#include <caf/all.hpp>
#include <httplib.h>
#include <zmq.hpp>

#include "cluster_page.hpp" // generated from src/admin/cluster_page.html
#include "prfaas/runtime/cluster_view.hpp"
#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/observer.hpp"
#include "prfaas/runtime/sim_data_plane.hpp"
#include "prfaas/runtime/supervisor.hpp"
#include "prfaas/runtime/zmq_wire.hpp"

namespace prfaas {

namespace {

uint64_t wall_clock_incarnation() {
  // Wall-clock nanoseconds: a restarted process gets a higher incarnation than
  // its predecessor, which is what the failure detector needs to tell them apart.
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

/// Sends an exit message to `a` and waits until it is gone (live nodes only).
void stop_and_wait(caf::actor_system& sys, const caf::actor& a) {
  if (!a)
    return;
  caf::scoped_actor self{sys};
  self->monitor(a);
  self->send_exit(a, caf::exit_reason::user_shutdown);
  self->receive([](const caf::down_msg&) {},
                caf::after(std::chrono::seconds(10)) >>
                    [&] { self->send_exit(a, caf::exit_reason::kill); });
}

} // namespace

node::node(caf::actor_system& sys, const deployment_config& dep, const std::string& name,
           const actor_registry& reg, node_options opts)
    : sys_(sys), dep_(dep), cfg_([&]() -> const node_config& {
        auto* n = dep.find_node(name);
        if (!n)
          throw config_error("nodes", "no node named \"" + name + "\" in deployment " + dep.name);
        return *n;
      }()),
      reg_(reg), opts_(std::move(opts)),
      incarnation_(opts_.incarnation != 0 ? opts_.incarnation : wall_clock_incarnation()) {}

node::~node() {
  stop();
}

std::string node::control_endpoint() const {
  return wire_ ? wire_->local_endpoint() : cfg_.control;
}

std::string node::data_endpoint() const {
  return data_ ? data_->local_endpoint() : std::string{};
}

// Runs before the transport starts: mapping (and pre-faulting) the buffer pools takes
// a moment, and peers should not see this node up (heartbeats) before it can take work.
void node::start_data_plane() {
  if (cfg_.data.empty())
    return;
  const auto& s = dep_.data_plane;
  data_plane_config dc;
  dc.node = cfg_.name;
  dc.incarnation = incarnation_;
  dc.epochs = messenger_->epochs(); // fencing: one view of the peers for both planes
  dc.bind = opts_.data_override.empty() ? cfg_.data : opts_.data_override;
  // Our own node is a peer too: a prefill worker may ship KV to a decode worker
  // beside it (same node), over loopback like any other transfer.
  dc.peers[cfg_.name] = dc.bind;
  for (auto& n : dep_.nodes) {
    if (n.name == cfg_.name || n.data.empty())
      continue;
    auto it = opts_.peer_data_endpoints.find(n.name);
    dc.peers[n.name] = it != opts_.peer_data_endpoints.end() ? it->second : n.data;
    data_link_config link{.connections = s.connections, .rate_bps = 0};
    if (n.cluster != cfg_.cluster)
      if (auto* l = dep_.find_link(n.cluster, cfg_.cluster))
        link = {.connections = l->connections, .rate_bps = l->rate_bps};
    dc.links[n.name] = link;
  }
  dc.default_link = {.connections = s.connections, .rate_bps = 0};
  static_cast<data_plane_limits&>(dc) = s;
  dc.faults = s.faults;
  dc.receive_pool = {.buffer_bytes = s.pool_buffer_bytes,
                     .buffers = s.pool_receive_buffers,
                     .prefault = s.pool_prefault,
                     .huge_pages = s.pool_huge_pages};
  dc.send_pool = dc.receive_pool;
  dc.send_pool.buffers = s.pool_send_buffers;
  dc.bulk_tcp = s.bulk_tcp;
  dc.queue_delay_target = s.queue_delay_target;
  dc.nice = static_cast<int>(s.nice);
  dc.security = security_;
  // `blackhole_peers` entries are "dst" (from every node) or "src->dst" (from src only).
  dc.faults.blackhole_peers.clear();
  for (auto& entry : s.faults.blackhole_peers) {
    auto arrow = entry.find("->");
    if (arrow == std::string::npos)
      dc.faults.blackhole_peers.push_back(entry);
    else if (entry.substr(0, arrow) == cfg_.name)
      dc.faults.blackhole_peers.push_back(entry.substr(arrow + 2));
  }
  if (opts_.sim) {
    data_ = attach_sim_data_plane(std::move(dc));
    data_->start();
    return;
  }
  data_ = make_zmq_data_plane(std::move(dc), *metrics_, log_);
  try {
    data_->start();
  } catch (const std::exception& e) {
    throw std::runtime_error("node " + cfg_.name + ": cannot start the data plane: " + e.what());
  }
}

data_plane_ptr node::attach_sim_data_plane(data_plane_config dc) {
  // The fabric models the links (shared capacity, latency, partitions) from the
  // deployment: every node's cluster, every link's rate. Idempotent across nodes.
  auto fabric = opts_.sim->data_fabric();
  for (auto& n : dep_.nodes)
    fabric->set_cluster(n.name, n.cluster);
  for (auto& l : dep_.link_list) {
    fabric->set_link_rate(l.a, l.b, static_cast<double>(l.rate_bps));
    fabric->set_link_rate(l.b, l.a, static_cast<double>(l.rate_bps));
  }
  return fabric->attach(std::move(dc), *metrics_, log_);
}

std::string node::escalation_reason() const {
  std::lock_guard<std::mutex> guard{escalated_->mtx};
  return escalated_->reason;
}

bool node::wait_escalation(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> guard{escalated_->mtx};
  return escalated_->cv.wait_for(guard, timeout, [&] { return escalated_->flag.load(); });
}

void node::start_wire(const std::map<std::string, std::string>& endpoints) {
  if (opts_.sim) {
    wire_ = opts_.sim->attach(cfg_.name);
  } else {
    if (!opts_.zmq)
      throw std::invalid_argument("node " + cfg_.name + ": no ZeroMQ context given");
    auto bind = opts_.control_override.empty() ? cfg_.control : opts_.control_override;
    security_ = make_node_security(dep_, cfg_.name, metrics_, log_);
    try {
      wire_ = std::make_shared<zmq_wire>(*opts_.zmq, cfg_.name, bind, endpoints, dep_.transport,
                                         log_, security_);
    } catch (const zmq::error_t& e) {
      throw std::runtime_error("node " + cfg_.name + ": cannot bind control endpoint " + bind +
                               ": " + e.what());
    }
  }
}

void node::start_actors() {
  std::vector<child_spec> children;
  for (auto& a : cfg_.actors) {
    auto* type = reg_.find(a.type);
    if (!type)
      throw config_error(a.path + ".type", "unknown actor type \"" + a.type + "\"");
    auto params = reg_.params_for(a);
    child_spec spec;
    spec.name = a.name;
    spec.type = a.type;
    spec.restart = parse_restart_policy(a.restart);
    spec.start = [ctx = ctx_, type, name = a.name, params] {
      return type->factory(*ctx, name, params);
    };
    children.push_back(std::move(spec));
  }
  supervisor_hooks hooks;
  hooks.started = [m = messenger_](const std::string& n, const caf::actor& a) {
    m->register_actor(n, a);
  };
  hooks.stopped = [m = messenger_](const std::string& n, const caf::actor& a) {
    m->unregister_actor(n, a);
  };
  supervisor_ = spawn_supervisor(sys_, std::move(children), dep_.supervision, std::move(hooks),
                                 *metrics_, log_);
  supervisor_->attach_functor([esc = escalated_, log = log_](const caf::error& reason) {
    if (reason.category() != error_category || static_cast<errc>(reason.code()) != errc::escalated)
      return;
    {
      std::lock_guard<std::mutex> guard{esc->mtx};
      esc->reason = describe(reason);
      esc->flag = true;
    }
    esc->cv.notify_all();
    log->critical("node_escalated reason=\"{}\"", describe(reason));
  });
}

void node::start() {
  if (started_)
    return;
  started_ = true;
  metrics_ = std::make_shared<metrics>(cfg_.name);
  log_ = opts_.log ? opts_.log
                   : make_node_logger(cfg_.name, incarnation_, cfg_.log.value_or(dep_.log));
  std::set<std::string> peers;
  std::map<std::string, std::string> endpoints;
  for (auto& n : dep_.nodes) {
    peers.insert(n.name);
    endpoints[n.name] = n.control;
  }
  messenger_ = std::make_shared<messenger>(sys_, cfg_.name, incarnation_, peers, dep_.transport,
                                           metrics_, log_);
  faults_ =
      std::make_shared<fault_points>(dep_.faults, cfg_.name + "#" + std::to_string(incarnation_));
  messenger_->set_faults(faults_);
  start_wire(endpoints);
  start_data_plane(); // before the transport: see there
  transport_ = spawn_transport(sys_, messenger_, dep_.failure_detector);
  messenger_->start(wire_, caf::actor_cast<caf::actor>(transport_));
  ctx_ = std::make_shared<node_context>(sys_, dep_, cfg_, incarnation_, messenger_, transport_,
                                        metrics_, log_);
  ctx_->set_faults(faults_);
  ctx_->set_data_plane(data_); // null without a data endpoint
  if (opts_.serve_admin && !cfg_.admin.empty())
    start_admin();

  start_actors();
  log_->info("node_started deployment={} control={} actors={} peers={}", dep_.name,
             control_endpoint(), cfg_.actors.size(), peers.size() - 1);
}

void node::stop() {
  if (!started_ || stopped_)
    return;
  stopped_ = true;
  if (opts_.sim) {
    if (supervisor_)
      caf::anon_send_exit(supervisor_, caf::exit_reason::user_shutdown);
    if (data_)
      data_->stop();
    if (transport_)
      caf::anon_send_exit(transport_, caf::exit_reason::user_shutdown);
    if (messenger_)
      messenger_->stop();
  } else {
    stop_and_wait(sys_, supervisor_);
    if (data_)
      data_->stop();
    if (admin_) {
      admin_->stop();
      if (admin_thread_.joinable())
        admin_thread_.join();
    }
    if (observer_)
      observer_->stop();
    stop_and_wait(sys_, caf::actor_cast<caf::actor>(transport_));
    if (messenger_)
      messenger_->stop();
  }
  if (log_) {
    log_->info("node_stopped");
    log_->flush();
  }
}

std::string node::health_json() {
  std::ostringstream out;
  bool ok = !escalated();
  out << "{\"status\":\"" << (ok ? "ok" : "escalated") << "\",\"node\":\"" << cfg_.name
      << "\",\"incarnation\":" << incarnation_ << ",\"peers\":[";
  caf::scoped_actor self{sys_};
  bool first = true;
  self->request(transport_, std::chrono::seconds(1), peers_atom_v)
      .receive(
          [&](const std::vector<peer_view>& peers) {
            for (auto& p : peers) {
              out << (first ? "" : ",") << "{\"node\":\"" << p.node << "\",\"state\":\""
                  << to_string(p.state) << "\",\"incarnation\":" << p.incarnation << "}";
              first = false;
            }
          },
          [](caf::error&) {});
  out << "],\"actors\":[";
  first = true;
  self->request(supervisor_, std::chrono::seconds(1), children_atom_v)
      .receive(
          [&](const std::vector<child_status>& kids) {
            for (auto& k : kids) {
              out << (first ? "" : ",") << "{\"name\":\"" << k.name << "\",\"type\":\"" << k.type
                  << "\",\"running\":" << (k.running ? "true" : "false")
                  << ",\"restarts\":" << k.restarts << "}";
              first = false;
            }
          },
          [](caf::error&) {});
  out << "]}";
  return out.str();
}

std::string node::set_live_fault(const std::string& point, const std::string& body, int& status) {
  double p = -1;
  try {
    size_t used = 0;
    p = std::stod(body, &used);
    if (body.find_first_not_of(" \t\r\n", used) != std::string::npos)
      p = -1;
  } catch (const std::exception&) {
  }
  if (!(p >= 0 && p <= 1)) {
    status = 400;
    return "PUT /faults/" + point + ": the body must be a probability in [0, 1], got \"" +
           body.substr(0, 40) + "\"\n";
  }
  try {
    if (dep_.faults.seed == 0) // the file armed nothing: a seed of this incarnation's
      faults_->set_seed(incarnation_);
    faults_->set(point, p);
  } catch (const std::exception& e) {
    status = 404;
    return "PUT /faults/" + point + ": " + e.what() + "\n";
  }
  log_->warn("live_fault point={} probability={} fired_so_far={}", point, p, faults_->fired(point));
  status = 200;
  return "ok fired=" + std::to_string(faults_->fired(point)) + "\n";
}

void node::install_cluster_page() {
  observer_ = std::make_unique<node_observer>(metrics_, node_observer::settings{});
  observer_->start();
  admin_->Get("/overview", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(observer_->overview_json(), "application/json");
  });
  // Any node draws the whole deployment: it asks every node's /health and /overview.
  admin_->Get("/cluster", [this](const httplib::Request&, httplib::Response& res) {
    auto g = gather_cluster(dep_, std::chrono::milliseconds(1500), true);
    res.set_content(cluster_json(dep_, g, cfg_.name), "application/json");
  });
  admin_->Get("/ui", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(cluster_page_html, "text/html; charset=utf-8");
  });
  admin_->Get("/",
              [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/ui"); });
}

void node::start_admin() {
  auto colon = cfg_.admin.rfind(':');
  auto host = cfg_.admin.substr(0, colon);
  int port = std::stoi(cfg_.admin.substr(colon + 1));
  admin_ = std::make_unique<httplib::Server>();
  admin_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_->serialize(), "text/plain; version=0.0.4; charset=utf-8");
  });
  admin_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.status = escalated() || stopped_ ? 503 : 200;
    res.set_content(health_json(), "application/json");
  });
  install_cluster_page();
  if (opts_.live_faults)
    admin_->Put(
        R"(/faults/([A-Za-z0-9_.]+))", [this](const httplib::Request& req, httplib::Response& res) {
          res.set_content(set_live_fault(req.matches[1], req.body, res.status), "text/plain");
        });
  if (port == 0) {
    admin_port_ = admin_->bind_to_any_port(host);
  } else if (admin_->bind_to_port(host, port)) {
    admin_port_ = port;
  } else {
    admin_port_ = -1;
  }
  if (admin_port_ <= 0)
    throw std::runtime_error("node " + cfg_.name + ": cannot bind admin endpoint " + cfg_.admin);
  admin_thread_ = std::thread{[srv = admin_.get()] { srv->listen_after_bind(); }};
  log_->info("admin_listening endpoint={}:{}", host, admin_port_);
}

} // namespace prfaas
