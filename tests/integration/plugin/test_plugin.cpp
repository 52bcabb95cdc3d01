// Out-of-tree extension, end to end: examples/custom_actor, built against the installed
// prfaas package, is loaded by the installed prfaas-node from the deployment's
// `plugins:` list; its actor type, started by name, answers a request from another
// node (this test process). Plugins the node must not run are refused at start with
// exit code 2 and a message naming the library and the reason.

#include <csignal>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <catch2/catch.hpp>
#include <zmq.hpp>

#include "package.hpp"
#include "prfaas/messages/type_ids.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/node.hpp"
#include "prfaas/runtime/remote.hpp"
#include "prfaas/wire/examples.pb.h"
#include "support/process.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using prfaas::test::child_process;
using prfaas::test::installed_node;
using prfaas::test::temp_dir;

namespace {

// Upper bounds only: a healthy run takes a fraction of each.
constexpr auto peer_up_limit = 30s; ///< node process start + first heartbeats
constexpr auto exit_limit = 30s;    ///< SIGTERM to exit, or a refused start
constexpr auto request_timeout = 10s;

constexpr int exit_config = 2; ///< prfaas-node: bad configuration or plugin

/// A deployment whose first node, `plugin-node`, loads `plugins` and runs `actors`
/// (YAML flow sequences), and whose second, `client`, runs nothing: this test process
/// plays it. Every endpoint is a free loopback port.
std::string deployment(const std::vector<fs::path>& plugins, const std::string& actors) {
  auto ports = prfaas::test::free_ports(4);
  auto endpoint = [&](size_t i) { return "tcp://127.0.0.1:" + std::to_string(ports[i]); };
  std::ostringstream y;
  y << "deployment: plugin-test\n";
  y << "plugins: [";
  for (size_t i = 0; i < plugins.size(); ++i)
    y << (i ? ", " : "") << '"' << plugins[i].string() << '"';
  y << "]\n";
  y << "nodes:\n";
  y << "  - name: plugin-node\n";
  y << "    control: " << endpoint(0) << "\n";
  y << "    data: " << endpoint(1) << "\n";
  y << "    actors: " << actors << "\n";
  y << "  - name: client\n";
  y << "    control: " << endpoint(2) << "\n";
  y << "    data: " << endpoint(3) << "\n";
  return y.str();
}

struct refusal {
  int code = -1;      ///< exit code; -1 when still running after exit_limit
  std::string err;    ///< its stderr
  std::string output; ///< command line and both streams, for failure messages
};

/// Runs the installed prfaas-node's `plugin-node` on a deployment it must refuse.
refusal start_refused(const temp_dir& dir, const fs::path& plugin,
                      const std::string& actors = "[]") {
  auto file = dir.file("deployment.yaml", deployment({plugin}, actors));
  child_process node{
      installed_node({"--config", file.string(), "--node", "plugin-node"}, dir.path() / "node")};
  auto code = node.wait(exit_limit);
  return {code.value_or(-1), node.err(), node.output()};
}

/// Polls `client`'s failure detector until `peer` is up, `server` has exited or the
/// limit passed.
bool wait_peer_up(caf::actor_system& sys, prfaas::node& client, const std::string& peer,
                  child_process& server) {
  caf::scoped_actor self{sys};
  bool up = false;
  prfaas::test::eventually(
      [&] {
        self->request(client.transport(), 1s, prfaas::peers_atom_v)
            .receive(
                [&](const std::vector<prfaas::peer_view>& peers) {
                  for (auto& p : peers)
                    up = up || (p.node == peer && p.state == prfaas::peer_state::up);
                },
                [](caf::error&) {});
        return up || !server.running();
      },
      peer_up_limit, 50ms);
  return up;
}

struct answer {
  std::optional<prfaas::examples::Pong> pong;
  std::string error;
};

/// A Ping request from `client` to `to`; the Pong, or why there is none.
answer ping(caf::actor_system& sys, prfaas::node& client, prfaas::address to, uint64_t sequence,
            const std::string& data) {
  prfaas::examples::Ping msg;
  msg.set_sequence(sequence);
  msg.set_data(data);
  auto request = prfaas::make_remote(client.context().local("test"), std::move(to), msg);
  answer a;
  caf::scoped_actor self{sys};
  prfaas::request_remote(self.ptr(), client.context(), std::move(request), request_timeout)
      .receive(
          [&](prfaas::remote_message& reply) {
            prfaas::examples::Pong pong;
            if (prfaas::parse_remote(reply, pong))
              a.pong = pong;
            else
              a.error = "unexpected reply type " + reply.type;
          },
          [&](caf::error& e) { a.error = prfaas::describe(e); });
  return a;
}

} // namespace

TEST_CASE("the example plugin builds against the installed package and runs in its node") {
  auto& plugin = prfaas::test::example_plugin();
  temp_dir dir{"prfaas-plugin-run"};

  SECTION("the plugin's actor type answers a request from another node") {
    auto file = dir.file("deployment.yaml",
                         deployment({plugin}, "[{type: greeter, name: greeter}, "
                                              "{type: greeter, name: hi, greeting: hi}]"));
    auto dep = prfaas::load_deployment(file.string());
    child_process server{
        installed_node({"--config", file.string(), "--node", "plugin-node"}, dir.path() / "node")};
    {
      caf::actor_system_config cfg;
      cfg.set("scheduler.max-threads", size_t{2});
      cfg.add_message_types<caf::id_block::prfaas>();
      caf::actor_system sys{cfg};
      zmq::context_t zctx{1};
      prfaas::actor_registry no_types; // the client node runs no actors
      prfaas::node_options opts;
      opts.zmq = &zctx;
      prfaas::node client{sys, dep, "client", no_types, opts};
      client.start();
      if (!wait_peer_up(sys, client, "plugin-node", server))
        FAIL("plugin-node never came up\n" << server.output());

      auto a = ping(sys, client, {"plugin-node", "greeter"}, 7, "from the test");
      auto b = ping(sys, client, {"plugin-node", "hi"}, 8, "again");
      client.stop();
      INFO(server.output());
      // `greeter` runs with the parameter's registered default.
      CHECK(a.error == "");
      REQUIRE(a.pong);
      CHECK(a.pong->data() == "hello, from the test");
      CHECK(a.pong->sequence() == 7);
      CHECK(a.pong->responder() == "plugin-node/greeter");
      CHECK(a.pong->incarnation() != 0);

      // `hi` sets the parameter in the deployment file; it reaches the plugin's factory.
      CHECK(b.error == "");
      REQUIRE(b.pong);
      CHECK(b.pong->data() == "hi, again");
      CHECK(b.pong->responder() == "plugin-node/hi");
    }
    server.signal(SIGTERM);
    auto code = server.wait(exit_limit);
    INFO(server.output());
    REQUIRE(code.value_or(-1) == 0);
  }

  SECTION("an unknown parameter of the plugin's actor type is refused naming its key path") {
    auto r = start_refused(dir, plugin, "[{type: greeter, name: greeter, greting: hey}]");
    INFO(r.output);
    CHECK(r.code == exit_config);
    CHECK_THAT(r.err, Catch::Contains("nodes[0].actors[0].greting"));
    CHECK_THAT(r.err, Catch::Contains("unknown parameter for actor type greeter"));
  }
}

TEST_CASE("a plugin path that does not exist is refused") {
  temp_dir dir{"prfaas-plugin-run"};
  auto missing = dir.path() / "no-such-plugin.so";
  auto r = start_refused(dir, missing);
  INFO(r.output);
  CHECK(r.code == exit_config);
  CHECK_THAT(r.err, Catch::Contains("cannot load"));
  CHECK_THAT(r.err, Catch::Contains(missing.string()));
}

TEST_CASE("a plugin built against another protocol version is refused") {
  temp_dir dir{"prfaas-plugin-run"};
  auto r = start_refused(dir, PRFAAS_WRONG_VERSION_PLUGIN);
  INFO(r.output);
  CHECK(r.code == exit_config);
  CHECK_THAT(r.err, Catch::Contains("built against protocol version"));
  CHECK_THAT(r.err, Catch::Contains(PRFAAS_WRONG_VERSION_PLUGIN));
}

TEST_CASE("a library without the plugin entry points is refused") {
  temp_dir dir{"prfaas-plugin-run"};
  auto r = start_refused(dir, PRFAAS_NOT_A_PLUGIN);
  INFO(r.output);
  CHECK(r.code == exit_config);
  CHECK_THAT(r.err, Catch::Contains("not a prfaas plugin"));
  CHECK_THAT(r.err, Catch::Contains(PRFAAS_NOT_A_PLUGIN));
}
