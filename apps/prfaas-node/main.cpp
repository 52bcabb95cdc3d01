// prfaas-node: runs one node of a deployment file, or all of them in one process.
//
//   prfaas-node --config FILE --node NAME     one node
//   prfaas-node --config FILE --all           every node of the file in this process
//   prfaas-node --config FILE --check         validate and exit
//   prfaas-node                               every node of the embedded default,
//                                             configs/local.yaml compiled in
//   prfaas-node keygen [--node NAME] [--out FILE]   a CURVE key pair (security:)
//   prfaas-node actor-types [--plugin LIB] [--update FILE]   every actor type's parameters
//
// Exit codes: 0 clean shutdown (SIGINT/SIGTERM), 1 runtime failure (e.g. cannot
// bind), 2 bad configuration or plugin, 3 a supervisor escalated.

#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <zmq.hpp>

#include "prfaas/messages/type_ids.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/actor_system.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/log.hpp"
#include "prfaas/runtime/node.hpp"
#include "prfaas/runtime/plugin.hpp"

#include "actor_types.hpp"
#include "embedded_config.hpp"
#include "keygen.hpp"
#include "prometheus_config.hpp"
#include "status.hpp"

namespace {

constexpr int exit_runtime = 1;
constexpr int exit_config = 2;
constexpr int exit_escalated = 3;

/// --log-level: every node of `dep` logs at `level` (parsed as a deployment would be).
void override_log_level(prfaas::deployment_config& dep, const std::string& level) {
  auto o = prfaas::parse_deployment("deployment: x\nlog_level: " + level +
                                        "\nnodes: [{name: a, control: tcp://127.0.0.1:1, "
                                        "data: tcp://127.0.0.1:2}]",
                                    "--log-level");
  dep.log = o.log;
  for (auto& n : dep.nodes)
    n.log = o.log;
}

/// The tool subcommands beside running nodes.
struct subcommands {
  prfaas::app::keygen_options keygen_opts;
  prfaas::app::actor_types_options types_opts;
  std::string scrape_interval = "5s";
  CLI::App* keygen = nullptr;
  CLI::App* types = nullptr;
  CLI::App* prometheus = nullptr;
  CLI::App* status = nullptr;
};

/// The tool subcommands, and --log-format (it applies before any node starts).
void add_subcommands(CLI::App& app, subcommands& s) {
  app.add_option_function<std::string>(
         "--log-format",
         [](const std::string& f) {
           prfaas::set_log_format(f == "json" ? prfaas::log_format::json
                                              : prfaas::log_format::text);
         },
         "text (`event key=value` lines, the default) or json (one object per line, the "
         "same fields)")
      ->check(CLI::IsMember({"text", "json"}));
  s.keygen = app.add_subcommand("keygen", "make a node's CURVE key pair (see security: in "
                                          "configs/sample.yaml)");
  s.keygen->add_option("--out,-o", s.keygen_opts.out,
                       "write the key pair to this file (mode 0600)");
  s.keygen->add_option("--node,-n", s.keygen_opts.node, "the node the key is for");
  s.types = app.add_subcommand("actor-types", "print every actor type with its parameters' "
                                              "defaults and docs (configs/sample.yaml's block)");
  s.types->add_option("--plugin", s.types_opts.plugins, "also a plugin's types (repeatable)");
  s.types->add_option("--update", s.types_opts.update,
                      "rewrite the generated block of this file instead of printing");
  s.prometheus = app.add_subcommand("prometheus-config",
                                    "print a Prometheus scrape configuration for every node of "
                                    "the deployment (--config, or the embedded one) and exit");
  s.prometheus->add_option("--interval", s.scrape_interval,
                           "scrape interval (Prometheus duration)");
  s.prometheus->fallthrough(); // --config may come after the subcommand
  s.status = app.add_subcommand("status", "show every node of the deployment (--config, or the "
                                          "embedded one) as its nodes see it; exit 1 unless all "
                                          "are up");
  s.status->fallthrough();
}

/// The exit code of the tool subcommand given, if one is given that needs no deployment.
std::optional<int> run_tool(const subcommands& s) {
  if (*s.keygen)
    return prfaas::app::run_keygen(s.keygen_opts);
  if (*s.types)
    return prfaas::app::run_actor_types(s.types_opts);
  return std::nullopt;
}

/// The node command's own options (the subcommands have theirs).
struct node_cli {
  std::string config_file;
  std::string node_name;
  bool all = false, check = false;
  std::string log_level;
  unsigned threads = 2;
  bool live_faults = false;

  void add_to(CLI::App& app) {
    app.add_option("--config,-c", config_file,
                   "deployment file (YAML); default: the embedded configs/local.yaml, all nodes");
    auto* node_opt = app.add_option("--node,-n", node_name, "the node of the deployment to run");
    auto* all_opt = app.add_flag("--all", all, "run every node of the deployment in this process");
    node_opt->excludes(all_opt);
    app.add_flag("--check", check, "validate the deployment (and plugins) and exit");
    app.add_option("--log-level", log_level, "override the configured log level")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
    app.add_option("--threads", threads, "actor scheduler threads")->check(CLI::Range(1u, 64u));
    app.add_flag("--live-faults", live_faults,
                 "chaos testing: the admin endpoint takes PUT /faults/<point> (body: a "
                 "probability) to switch fault points while the node runs");
  }
};

/// The deployment (given or embedded), its plugins loaded and every key validated;
/// nothing on a configuration error, which is printed.
std::optional<prfaas::deployment_config> load(node_cli& cli, prfaas::actor_registry& registry) {
  try {
    prfaas::deployment_config dep;
    if (cli.config_file.empty()) {
      dep =
          prfaas::parse_deployment(prfaas::app::embedded_config, prfaas::app::embedded_config_name);
      cli.config_file = prfaas::app::embedded_config_name;
      cli.all = cli.all || cli.node_name.empty();
    } else {
      dep = prfaas::load_deployment(cli.config_file);
    }
    for (auto& p : dep.plugins)
      prfaas::load_plugin(p, registry);
    registry.validate(dep);
    if (!cli.log_level.empty())
      override_log_level(dep, cli.log_level);
    return dep;
  } catch (const prfaas::config_error& e) {
    std::cerr << "prfaas-node: configuration error: " << e.what() << "\n";
  } catch (const prfaas::plugin_error& e) {
    std::cerr << "prfaas-node: " << e.what() << "\n";
  }
  return std::nullopt;
}

/// Runs until SIGINT/SIGTERM (0) or until a node escalates (exit_escalated).
int wait_for_signal(const sigset_t& sigs, const std::vector<std::unique_ptr<prfaas::node>>& nodes) {
  timespec tick{0, 100 * 1000 * 1000};
  for (;;) {
    int sig = sigtimedwait(&sigs, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM)
      return 0;
    bool escalated = false;
    for (auto& n : nodes)
      if (n->escalated()) {
        std::cerr << "prfaas-node: node " << n->name() << " escalated: " << n->escalation_reason()
                  << "\n";
        escalated = true;
      }
    if (escalated)
      return exit_escalated;
  }
}

/// Starts the chosen nodes in one actor system and runs them until told to stop.
int run_nodes(const prfaas::deployment_config& dep, const prfaas::actor_registry& registry,
              const node_cli& cli) {
  // Signals are taken synchronously by this thread: block them before any other
  // thread (CAF, ZeroMQ, HTTP) exists so those threads inherit the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  int rc = 0;
  caf::actor_system_config cfg;
  prfaas::configure_actor_system(cfg, cli.threads);
  caf::actor_system sys{cfg};
  zmq::context_t zctx{1};
  std::vector<std::unique_ptr<prfaas::node>> nodes;
  try {
    for (auto& n : dep.nodes) {
      if (!cli.all && n.name != cli.node_name)
        continue;
      prfaas::node_options opts;
      opts.zmq = &zctx;
      opts.live_faults = cli.live_faults;
      nodes.push_back(std::make_unique<prfaas::node>(sys, dep, n.name, registry, opts));
      nodes.back()->start();
    }
  } catch (const std::exception& e) {
    std::cerr << "prfaas-node: " << e.what() << "\n";
    rc = exit_runtime;
  }
  if (rc == 0)
    rc = wait_for_signal(sigs, nodes);
  for (auto i = nodes.rbegin(); i != nodes.rend(); ++i)
    (*i)->stop();
  nodes.clear();
  return rc;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"prfaas-node: run nodes of a prfaas deployment"};
  node_cli cli;
  cli.add_to(app);
  subcommands sub;
  add_subcommands(app, sub);
  CLI11_PARSE(app, argc, argv);
  if (auto code = run_tool(sub))
    return *code;

  auto registry = prfaas::actor_registry::with_builtins();
  auto loaded = load(cli, registry);
  if (!loaded)
    return exit_config;
  const auto& dep = *loaded;
  if (*sub.status)
    return prfaas::app::run_status(dep, std::cout);
  if (*sub.prometheus)
    return prfaas::app::print_prometheus_config(dep, sub.scrape_interval);
  if (!cli.all && cli.node_name.empty() && !cli.check) {
    std::cerr << "prfaas-node: give --node NAME or --all\n";
    return exit_config;
  }
  if (!cli.node_name.empty() && !dep.find_node(cli.node_name)) {
    std::cerr << "prfaas-node: configuration error: " << cli.config_file
              << ": nodes: no node named \"" << cli.node_name << "\"\n";
    return exit_config;
  }
  if (cli.check) {
    std::cout << "ok: deployment " << dep.name << ", " << dep.nodes.size() << " nodes\n";
    return 0;
  }
  return run_nodes(dep, registry, cli);
}
