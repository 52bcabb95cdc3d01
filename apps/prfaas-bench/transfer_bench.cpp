// prfaas-bench transfer: the KVCache data plane between two processes.
//
//  * bulk: one transfer of --bytes (1 GiB) in --chunk (4 MiB) chunks over
//          --connections, produced into send pool buffers (as an engine exports) and
//          timed from open() until the receiver confirmed it; next to plain TCP (the
//          limit: the same connections, chunk-sized writes from a warm buffer, reads
//          into a warm buffer), iperf3 -P N for reference, and raw ZeroMQ (one
//          DEALER -> ROUTER, the same chunks zero-copy), alternating, best of --repeat;
//          CPU seconds and minor page faults per GB on each side after the first run,
//          and the receiver's peak RSS during a data-plane transfer;
//  * rtt:  control-plane round trips (prfaas transport, request to the server's echo
//          actor) measured idle and while the data plane moves the bulk transfer;
//  * link: with --link-rate, utilisation = achieved payload rate / link rate.
//
// Both ends are prfaas nodes of one small deployment (clusters `src` and `dst` with
// a link between them, which carries --connections and --pace), so the data plane
// and the control plane are the node's own.

#include "transfer_bench.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <iostream>
#include <memory>
#include <sstream>
#include <set>
#include <thread>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <zmq.hpp>

#include "prfaas/messages/type_ids.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/actor_system.hpp"
#include "prfaas/runtime/data_plane.hpp"
#include "prfaas/runtime/node.hpp"
#include "prfaas/messages/examples.hpp"
#include "prfaas/runtime/role.hpp"
#include "prfaas/wire/examples.pb.h"
#include "bench_node.hpp"
#include "stats.hpp"
#include "tcp_baseline.hpp"
#include "transfer_report.hpp"

namespace prfaas::bench {

void add_transfer_options(CLI::App& app, transfer_options& o) {
  auto* t = app.add_subcommand(
      "transfer",
      "KVCache data plane between two processes vs raw ZeroMQ, with control RTT under load");
  t->add_option("--bytes", o.bytes, "bytes per transfer")->capture_default_str();
  t->add_option("--chunk", o.chunk_bytes, "chunk size in bytes")->capture_default_str();
  t->add_option("--connections", o.connections, "data-plane connections to the peer")
      ->capture_default_str();
  t->add_option("--window-chunks", o.window_chunks, "credit: unacknowledged chunks per transfer")
      ->capture_default_str();
  t->add_option("--window-bytes", o.window_bytes, "credit: unacknowledged bytes per peer")
      ->capture_default_str();
  t->add_option("--pool-buffers", o.pool_buffers,
                "data_plane.pool_receive_buffers and pool_send_buffers (of --chunk bytes each)")
      ->capture_default_str();
  t->add_option("--repeat", o.repeat, "runs per measurement (best is reported)")
      ->capture_default_str();
  t->add_option("--pace", o.pace, "pace the data plane at this rate (e.g. 950mbit)");
  t->add_option("--queue-delay-target", o.queue_delay_target,
                "data_plane.queue_delay_target: pace the bulk connections to keep the path's "
                "queueing delay under this (e.g. 2ms; 0 = off, the default)");
  t->add_option("--link-rate", o.link_rate, "the link's rate (e.g. 1gbit): print utilisation");
  t->add_option("--listen", o.listen,
                "server mode: bind tcp://HOST:PORT (uses PORT..PORT+2 and PORT+5)");
  t->add_option("--peer-endpoint", o.peer_endpoint, "client mode: the server's --listen endpoint");
  t->add_option("--client-host", o.client_host, "address the client binds (PORT+3, PORT+4)")
      ->capture_default_str();
  t->add_flag("!--no-rtt", o.rtt, "skip control-plane round trips during the transfer");
  t->add_flag("--json", o.json, "also print one JSON line");
}

namespace {

constexpr const char* sink_name = "bench";

/// Where everything listens.
struct layout {
  std::string server_host = "127.0.0.1";
  std::string client_host = "127.0.0.1";
  int data = 0, raw = 0, control = 0, client_control = 0, client_data = 0, tcp = 0;

  static layout loopback() {
    layout l;
    l.tcp = free_port();
    l.data = free_port();
    l.raw = free_port();
    l.control = free_port();
    l.client_control = free_port();
    l.client_data = free_port();
    return l;
  }
  /// From "tcp://HOST:PORT": PORT..PORT+5.
  static layout from(const std::string& endpoint, const std::string& client_host) {
    auto colon = endpoint.rfind(':');
    if (endpoint.rfind("tcp://", 0) != 0 || colon == std::string::npos || colon < 6)
      throw std::invalid_argument("expected tcp://HOST:PORT, got '" + endpoint + "'");
    layout l;
    l.server_host = endpoint.substr(6, colon - 6);
    l.client_host = client_host;
    int p = std::stoi(endpoint.substr(colon + 1));
    l.data = p;
    l.raw = p + 1;
    l.control = p + 2;
    l.client_control = p + 3;
    l.client_data = p + 4;
    l.tcp = p + 5;
    return l;
  }
  std::string at(const std::string& host, int port) const {
    return "tcp://" + host + ":" + std::to_string(port);
  }
};

std::string deployment_yaml(const layout& l, const transfer_options& o) {
  std::ostringstream y;
  y << "deployment: bench-transfer\n"
    << "log_level: warn\n"
    << "transport: { outbound_queue: 100000 }\n"
    << "clusters: { src: { kind: prefill-only }, dst: { kind: pd } }\n"
    << "links:\n"
    << "  - between: [src, dst]\n"
    << "    connections: " << o.connections << "\n";
  if (!o.pace.empty())
    y << "    rate: " << o.pace << "\n";
  y << "data_plane: { transfer_timeout: 600s, window_chunks: " << o.window_chunks
    << ", window_bytes: " << o.window_bytes
    << ", max_chunk_bytes: " << std::max<uint64_t>(o.chunk_bytes, 1)
    << ", pool_buffer_bytes: " << std::max<uint64_t>(o.chunk_bytes, 1)
    << ", pool_receive_buffers: " << o.pool_buffers << ", pool_send_buffers: " << o.pool_buffers
    << ", pool_prefault: true"
    << (o.queue_delay_target.empty() ? "" : ", queue_delay_target: " + o.queue_delay_target)
    << " }\n"
    << "nodes:\n"
    << "  - name: server\n"
    << "    cluster: dst\n"
    << "    control: " << l.at(l.server_host, l.control) << "\n"
    << "    data: " << l.at(l.server_host, l.data) << "\n"
    << "    actors: [ { type: echo, name: echo } ]\n"
    << "  - name: client\n"
    << "    cluster: src\n"
    << "    control: " << l.at(l.client_host, l.client_control) << "\n"
    << "    data: " << l.at(l.client_host, l.client_data) << "\n";
  return y.str();
}

/// Raw ZeroMQ counterpart of the data-plane sink: counts ('C', 'K'), keeps the 'K'
/// chunks (as a KV receive holds its blocks) until 'F', answers queries ('Q'). Also
/// the server's figures: 'U' answers "cpu_seconds minor_faults peak_rss_bytes", 'Z'
/// starts a new peak RSS.
void raw_server(zmq::context_t& ctx, const std::string& endpoint, std::atomic<bool>& stop) {
  std::vector<zmq::message_t> kept;
  raw_router(ctx, endpoint, stop,
             [&kept](zmq::socket_t& router, char c, zmq::message_t& id, zmq::message_t&,
                     zmq::message_t& data) {
               if (c == 'K') {
                 kept.push_back(std::move(data));
               } else if (c == 'F') {
                 kept.clear();
               } else if (c == 'U' || c == 'Z') {
                 if (c == 'Z')
                   (void)reset_peak_rss();
                 auto u = self_usage();
                 auto text = std::to_string(u.cpu_s) + " " + std::to_string(u.minflt) + " " +
                             std::to_string(peak_rss_bytes());
                 router.send(id, zmq::send_flags::sndmore);
                 router.send(zmq::buffer(text), zmq::send_flags::none);
               }
             });
}

int server_main(const std::string& yaml, const layout& l, const transfer_options& o) {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  live_node server{yaml, "server"};
  auto* dp = server.self->context().data();
  if (dp == nullptr) {
    std::cerr << "prfaas-bench transfer: the server node has no data plane\n";
    return 1;
  }
  // The sink lets go of each chunk at once (its pool buffer goes back): the benchmark
  // measures the wire, not an import.
  dp->add_stream_sink(sink_name, {.chunk = [](const inbound_ref&, uint32_t, bulk_ptr) {},
                                  .end = [](received_transfer) {},
                                  .abort = [](const inbound_ref&, const std::string&) {}});
  tcp_sink tcp{l.server_host, l.tcp, o.chunk_bytes, o.pool_buffers};
  std::atomic<bool> stop{false};
  std::thread raw{[&] { raw_server(server.zctx, l.at(l.server_host, l.raw), stop); }};
  int sig = 0;
  sigwait(&sigs, &sig);
  stop = true;
  raw.join();
  return 0;
}

struct raw_client {
  zmq::socket_t dealer;
  raw_client(zmq::context_t& ctx, const std::string& endpoint)
      : dealer(ctx, zmq::socket_type::dealer) {
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::sndhwm, 100000);
    dealer.set(zmq::sockopt::sndbuf, 4 << 20);
    dealer.set(zmq::sockopt::rcvtimeo, 20000);
    dealer.connect(endpoint);
  }
  /// The server's CPU seconds, minor faults and peak RSS; `reset` starts a new peak.
  struct usage {
    double cpu_s = 0;
    uint64_t minflt = 0, peak_rss = 0;
  };
  usage server_usage(bool reset = false) {
    dealer.send(reset ? zmq::str_buffer("Z") : zmq::str_buffer("U"), zmq::send_flags::none);
    zmq::message_t reply;
    if (!dealer.recv(reply))
      throw std::runtime_error("raw ZeroMQ server does not answer");
    std::istringstream in{reply.to_string()};
    usage u;
    in >> u.cpu_s >> u.minflt >> u.peak_rss;
    return u;
  }
  std::pair<uint64_t, uint64_t> query() {
    dealer.send(zmq::str_buffer("Q"), zmq::send_flags::none);
    zmq::message_t reply;
    if (!dealer.recv(reply))
      throw std::runtime_error("raw ZeroMQ server does not answer");
    std::istringstream in{reply.to_string()};
    uint64_t m = 0, b = 0;
    in >> m >> b;
    return {m, b};
  }
  /// Seconds until the server counted every chunk of `chunks`, each its own buffer sent
  /// zero-copy and kept by the server until all arrived (then freed): the same transfer
  /// the data plane makes, with nothing of the data plane's protocol.
  double stream_kept(const std::vector<std::vector<std::byte>>& chunks) {
    auto before = query();
    auto t0 = clock_type::now();
    for (auto& c : chunks) {
      dealer.send(zmq::str_buffer("K"), zmq::send_flags::sndmore);
      zmq::message_t m(const_cast<std::byte*>(c.data()), c.size(), noop_free, nullptr);
      dealer.send(m, zmq::send_flags::none);
    }
    while (query().first < before.first + chunks.size())
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    double s = seconds_since(t0);
    dealer.send(zmq::str_buffer("F"), zmq::send_flags::none);
    return s;
  }
  /// Seconds until the server counted `n` messages of `buffer` (sent zero-copy), each
  /// dropped on arrival: one cache-hot buffer, no memory held — an upper bound.
  double stream(uint64_t n, const std::vector<std::byte>& buffer) {
    auto before = query();
    auto t0 = clock_type::now();
    for (uint64_t i = 0; i < n; ++i) {
      dealer.send(zmq::str_buffer("C"), zmq::send_flags::sndmore);
      zmq::message_t m(const_cast<std::byte*>(buffer.data()), buffer.size(), noop_free, nullptr);
      dealer.send(m, zmq::send_flags::none);
    }
    while (query().first < before.first + n)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    return seconds_since(t0);
  }
};

/// Round trips to the server's echo actor until `stop` (or `count` of them).
void round_trips(caf::actor_system& sys, node& client, const std::atomic<bool>& stop,
                 uint64_t count, std::vector<double>& out) {
  caf::scoped_actor self{sys};
  examples::Ping ping;
  ping.set_data(std::string(64, 'p'));
  for (uint64_t i = 0; !stop && i < count; ++i) {
    ping.set_sequence(i);
    const remote_ref<echo_role> echo{
        client.context().msgr(), {"client", "bench"}, {"server", "echo"}};
    auto t0 = clock_type::now();
    echo.request(self.ptr(), ping, std::chrono::seconds(5))
        .receive([](examples::Pong&) {},
                 [](caf::error& e) { throw std::runtime_error("round trip: " + describe(e)); });
    out.push_back(seconds_since(t0) * 1e6);
    // A ping every ~200 us: a steady probe, not a second bulk load.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

/// Measures one phase's cost on both sides (client: this process).
class cost_meter {
public:
  explicit cost_meter(raw_client& raw) : raw_(raw) {}
  void start(bool reset_peak = false) {
    c0_ = self_usage();
    s0_ = raw_.server_usage(reset_peak);
  }
  /// Adds what the phase cost to `into` (when `count`) and returns the server's peak RSS.
  uint64_t stop(cost& into, double bytes, bool count) {
    auto c1 = self_usage();
    auto s1 = raw_.server_usage();
    if (count) {
      into.client_cpu_s += c1.cpu_s - c0_.cpu_s;
      into.server_cpu_s += s1.cpu_s - s0_.cpu_s;
      into.client_minflt += c1.minflt - c0_.minflt;
      into.server_minflt += s1.minflt - s0_.minflt;
      into.bytes += bytes;
    }
    return s1.peak_rss;
  }

private:
  raw_client& raw_;
  proc_usage c0_;
  raw_client::usage s0_;
};

/// One data-plane transfer of `n` chunks pushed from send pool buffers while earlier
/// ones are on the wire; seconds from open to confirmation. A buffer gets the whole
/// pattern the first time it is seen (`filled`), later only the chunk's index: like
/// the plain TCP baseline's warm buffer, the bytes are there already (an engine writes
/// its export into them; that cost is the engine's, not the data plane's).
double data_transfer(data_plane& dp, uint64_t id, uint64_t n, const std::vector<std::byte>& pattern,
                     std::set<const std::byte*>& filled, transfer_outcome& out) {
  std::promise<transfer_outcome> done;
  auto f = done.get_future();
  auto pool = dp.send_pool();
  if (pool && pool->buffer_bytes() < pattern.size())
    pool = nullptr;
  auto t0 = clock_type::now();
  dp.open(id, "server", sink_name, "",
          [&done](transfer_outcome o) { done.set_value(std::move(o)); });
  for (uint64_t i = 0; i < n; ++i) {
    bulk_ptr chunk;
    if (pool) {
      // All buffers in flight: wait for an acknowledgement (back-pressure).
      auto b = pool->acquire(std::chrono::seconds(60));
      if (!b)
        throw std::runtime_error("no send pool buffer came back within 60 s");
      if (filled.insert(b.data()).second)
        std::memcpy(b.data(), pattern.data(), pattern.size());
      std::memcpy(b.data(), &i, sizeof i); // distinct chunks
      b.resize(pattern.size());
      chunk = std::move(b).share();
    } else {
      chunk = copy_bulk(pattern.data(), pattern.size());
    }
    dp.push(id, std::move(chunk));
  }
  dp.finish(id);
  out = f.get();
  double s = seconds_since(t0);
  if (!out.ok)
    throw std::runtime_error("transfer " + std::to_string(id) + " failed: " + out.error);
  return s;
}

/// A data-plane transfer with id `id`, with control round trips beside it when
/// `rtts` is given; its payload rate in GB/s.
double data_plane_run(live_node& me, data_plane& dp, uint64_t id, uint64_t n,
                      const std::vector<std::byte>& pattern, std::set<const std::byte*>& filled,
                      figures& fig, std::vector<double>* loaded) {
  std::atomic<bool> stop{false};
  std::vector<double> rtts;
  std::thread pinger;
  if (loaded != nullptr)
    pinger = std::thread{[&] { round_trips(*me.sys, *me.self, stop, UINT64_MAX, rtts); }};
  transfer_outcome out;
  double s = 0;
  try {
    s = data_transfer(dp, id, n, pattern, filled, out);
  } catch (...) {
    stop = true;
    if (pinger.joinable())
      pinger.join();
    throw;
  }
  stop = true;
  if (pinger.joinable())
    pinger.join();
  if (loaded != nullptr)
    loaded->insert(loaded->end(), rtts.begin(), rtts.end());
  fig.retransmits += out.stats.retransmits;
  return static_cast<double>(n * pattern.size()) / 1e9 / s;
}

figures client_main(const std::string& yaml, const layout& l, const transfer_options& o) {
  figures fig;
  if (l.server_host == "127.0.0.1")
    fig.iperf_gbps = iperf3_loopback_gbps(o.connections, 3, fig.iperf_why);
  else
    fig.iperf_why = "two-process mode: run iperf3 between the hosts yourself";
  live_node me{yaml, "client"};
  auto& client = *me.self;
  auto* dp = client.context().data();
  if (dp == nullptr)
    throw std::runtime_error("the client node has no data plane");
  {
    caf::scoped_actor self{*me.sys};
    wait_until_up(self, client);
  }
  raw_client raw{me.zctx, l.at(l.server_host, l.raw)};
  raw.query(); // connected
  cost_meter meter{raw};

  uint64_t n = std::max<uint64_t>(1, o.bytes / o.chunk_bytes);
  uint64_t bytes = n * o.chunk_bytes;
  std::vector<std::byte> pattern(o.chunk_bytes);
  for (size_t i = 0; i < pattern.size(); ++i)
    pattern[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  tcp_source tcp{l.server_host, l.tcp, o.connections, pattern, o.pool_buffers};

  // Idle control-plane round trips first.
  if (o.rtt) {
    std::vector<double> idle;
    std::atomic<bool> never{false};
    round_trips(*me.sys, client, never, 2000, idle);
    fig.idle_p50_us = percentile(idle, 50);
    fig.idle_p99_us = percentile(idle, 99);
  }
  std::vector<double> loaded;
  std::set<const std::byte*> filled;
  uint64_t id = 0;
  for (int r = 0; r < o.repeat; ++r) {
    // The first run warms everything up (pools, allocator, connections); costs count
    // from the second on (all runs when there is only one).
    const bool count = r > 0 || o.repeat == 1;
    fig.counted_runs += count ? 1 : 0;
    meter.start(true);
    fig.gbps = std::max(fig.gbps, data_plane_run(me, *dp, ++id, n, pattern, filled, fig, nullptr));
    fig.server_peak_rss =
        std::max(fig.server_peak_rss, meter.stop(fig.dp_cost, static_cast<double>(bytes), count));
    // The control plane's round trips under a saturating transfer: a run of its own, so
    // the pinger's CPU does not count against the throughput above.
    if (o.rtt)
      fig.gbps_pinged = std::max(fig.gbps_pinged,
                                 data_plane_run(me, *dp, ++id, n, pattern, filled, fig, &loaded));

    meter.start();
    fig.tcp_gbps = std::max(fig.tcp_gbps, static_cast<double>(bytes) / 1e9 / tcp.send(bytes, true));
    meter.stop(fig.tcp_cost, static_cast<double>(bytes), count);
    meter.start();
    fig.tcp_one_gbps =
        std::max(fig.tcp_one_gbps, static_cast<double>(bytes) / 1e9 / tcp.send(bytes, false));
    meter.stop(fig.tcp_one_cost, static_cast<double>(bytes), count);
    {
      std::vector<std::vector<std::byte>> raw_chunks(n, pattern);
      fig.raw_gbps =
          std::max(fig.raw_gbps, static_cast<double>(bytes) / 1e9 / raw.stream_kept(raw_chunks));
    }
    fig.raw_hot_gbps =
        std::max(fig.raw_hot_gbps, static_cast<double>(bytes) / 1e9 / raw.stream(n, pattern));
  }
  fig.rtt_samples = loaded.size();
  fig.load_p50_us = percentile(loaded, 50);
  fig.load_p99_us = percentile(loaded, 99);
  return fig;
}

} // namespace

int run_transfer_bench(const transfer_options& o) {
  if (o.chunk_bytes == 0 || o.connections == 0 || o.repeat < 1) {
    std::cerr << "prfaas-bench transfer: --chunk, --connections and --repeat must be positive\n";
    return 2;
  }
  if (!o.listen.empty() && !o.peer_endpoint.empty()) {
    std::cerr
        << "prfaas-bench transfer: --listen and --peer-endpoint are two different processes\n";
    return 2;
  }
  try {
    if (!o.link_rate.empty())
      (void)parse_rate(o.link_rate);
    if (!o.pace.empty())
      (void)parse_rate(o.pace);
  } catch (const std::exception& e) {
    std::cerr << "prfaas-bench transfer: bad rate: " << e.what() << "\n";
    return 2;
  }
  try {
    if (!o.listen.empty()) {
      auto l = layout::from(o.listen, o.client_host);
      return server_main(deployment_yaml(l, o), l, o);
    }
    if (!o.peer_endpoint.empty()) {
      auto l = layout::from(o.peer_endpoint, o.client_host);
      auto f = client_main(deployment_yaml(l, o), l, o);
      print(o, f, true);
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "prfaas-bench transfer: " << e.what() << "\n";
    return 1;
  }

  auto l = layout::loopback();
  auto yaml = deployment_yaml(l, o);
  // Fork before any actor system or ZeroMQ context exists: both run threads of their
  // own, which a forked child would not have.
  pid_t pid = fork();
  if (pid < 0) {
    std::cerr << "fork failed\n";
    return 1;
  }
  if (pid == 0)
    _exit(server_main(yaml, l, o));
  int rc = 0;
  figures f;
  try {
    f = client_main(yaml, l, o);
  } catch (const std::exception& e) {
    std::cerr << "prfaas-bench transfer: " << e.what() << "\n";
    rc = 1;
  }
  kill(pid, SIGTERM);
  int st = 0;
  waitpid(pid, &st, 0);
  if (rc == 0)
    print(o, f, false);
  return rc;
}

} // namespace prfaas::bench
