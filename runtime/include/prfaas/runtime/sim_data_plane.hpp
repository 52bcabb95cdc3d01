#pragma once

// The simulated KV data plane: the data_plane interface over a fluid model of the
// links, in virtual time (sim_time.hpp). Same contract as the ZeroMQ data plane —
// per-transfer ordering, delivery all at once when every chunk is there, `done`
// exactly once — without sockets or threads.
//
// The model (sim_data_fabric, one per simulation):
//  * every node belongs to a cluster; a transfer between clusters A and B runs on the
//    directed link A→B, whose capacity (bit/s, a schedule over virtual time) is shared
//    max-min fairly by the transfers that have bytes waiting on it: with no other
//    constraint that is an equal split among them, recomputed whenever a transfer
//    starts, gets bytes, drains or ends, or the capacity changes;
//  * a transfer within a cluster gets `local_rate` on its own (RDMA, not shared);
//  * bytes become sendable when pushed (layer-wise streaming: a prefill's pushes are
//    spread over its modeled time), and count as many wire bytes as `wire_size` says
//    (the profile engine moves kv_scale of the profiled KV bytes; the wire carries all
//    of them — the prefill worker installs the rule, engine_setup.hpp);
//  * loss p on a link leaves (1 − p) of its capacity for goodput and counts re-sends;
//  * a partition, an isolated node or a stopped (crashed) receiver stops a transfer
//    where it is; it fails through `done` when transfer_timeout passes after the
//    producer's last open, push or finish;
//  * delivery to the sink and the acknowledgement each take the pair's latency
//    (sim_network's latency table).
//
// With set_live(true) (before the nodes start) a node gets the real data plane instead
// — the ZeroMQ data plane's sender and receiver, credit, resume, NACK and re-send —
// with its sockets replaced by frames on this fabric (sim_live_plane.cpp): each
// directed cluster link is a first-in first-out pipe of the link's capacity (a frame
// occupies it for its wire size over the rate, then takes the pair's latency), a pair
// of nodes in one cluster has a pipe of `local_rate`; `set_loss` drops a frame with
// that probability and `set_corrupt` flips a byte of a chunk's payload; partitions,
// isolated and crashed nodes drop frames. Slower than the fluid model (every chunk
// and acknowledgement is an event): for chaos sweeps, not for scale runs.

#include <functional>
#include <map>
#include <span>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>

#include "prfaas/runtime/data_plane.hpp"
#include "prfaas/runtime/sim_network.hpp"
#include "prfaas/runtime/sim_time.hpp"

namespace prfaas {

class sim_data_plane;
class sim_frame_switch;

/// Totals of one directed cluster link, for utilisation over time.
struct sim_link_totals {
  double bytes_delivered = 0; ///< wire bytes that left the link (goodput)
  double capacity_bps = 0;    ///< now
  double backlog_bytes = 0;   ///< pushed, not yet sent
  uint32_t active = 0;        ///< transfers with bytes waiting
  uint32_t open = 0;          ///< transfers not yet complete
  uint64_t messages = 0;      ///< data-plane messages (pushes) taken onto the link
};

class sim_data_fabric : public std::enable_shared_from_this<sim_data_fabric> {
public:
  using time_point = sim_timer::time_point;

  /// Made by sim_network::data_fabric(); `net` owns it.
  sim_data_fabric(caf::actor_system& sys, sim_network* net);
  ~sim_data_fabric();

  void set_cluster(const std::string& node, const std::string& cluster);
  /// Capacity of the link from cluster `from` to `to` (bit/s); 0 = unlimited.
  void set_link_rate(const std::string& from, const std::string& to, double bps);
  /// The link's capacity becomes `bps` at virtual time `at` (both directions when
  /// `both`): fluctuating bandwidth.
  void schedule_link_rate(const std::string& a, const std::string& b, time_point at, double bps,
                          bool both = true);
  void set_loss(const std::string& from, const std::string& to, double p);
  /// Real data plane only: the probability that a chunk crossing the link arrives with
  /// a byte flipped (the receiver's checksum catches it; the fluid model ignores it).
  void set_corrupt(const std::string& from, const std::string& to, double p);
  /// Nodes attached from now on run the real data plane over simulated frames (above);
  /// `seed` seeds the frames' loss and corruption draws.
  void set_live(bool on, uint64_t seed = 1) {
    live_ = on;
    live_seed_ = seed;
  }
  bool live() const { return live_; }
  /// Per-transfer rate inside a cluster (bit/s).
  void set_local_rate(double bps) { local_rate_ = bps; }
  /// How many wire bytes a pushed chunk stands for; default: its size.
  using wire_size_fn = std::function<double(std::span<const std::byte>)>;
  void set_wire_size(wire_size_fn fn) { wire_size_ = std::move(fn); }

  /// A node's data plane (replaces an earlier one of the same node).
  data_plane_ptr attach(data_plane_config cfg, metrics& m, logger_ptr log);

  sim_link_totals totals(const std::string& from, const std::string& to) const;
  /// Transfers opened and not yet ended (done not yet called), over all nodes.
  size_t open_transfers() const { return flows_.size(); }
  /// Every directed link that carried or carries a transfer.
  std::vector<std::pair<std::string, std::string>> links() const;

  // -- used by sim_data_plane ---------------------------------------------------
  struct flow;
  struct link;
  void open(sim_data_plane* src, uint64_t id, const std::string& peer, const std::string& sink,
            std::string meta, data_plane::done_handler done, duration timeout);
  void push(const std::string& src, uint64_t id, bulk_ptr chunk);
  void finish(const std::string& src, uint64_t id);
  void cancel(const std::string& src, uint64_t id, const std::string& why);
  void detach(sim_data_plane* p);
  void fill_backlog(const std::string& node, std::vector<data_link_report>& out) const;
  void start_listening();
  sim_timer& timer() { return *timer_; }

  // -- used by the real data plane in simulation (sim_live_plane.cpp) ------------
  /// The pipe a frame from node `src` to node `dst` takes.
  struct frame_path {
    std::string pipe;        ///< pipes with the same name are one first-in first-out queue
    double capacity_bps = 0; ///< 0 = unlimited
    double loss = 0, corrupt = 0;
  };
  frame_path path_of(const std::string& src, const std::string& dst);
  /// Wire bytes that left the link from `src` toward `dst` (`chunk`: one data message).
  void count_frame(const std::string& src, const std::string& dst, double wire_bytes, bool chunk);
  /// The wire bytes a chunk stands for (set_wire_size).
  double wire_bytes(const bulk_ptr& chunk) const;
  sim_network& net() { return *net_; }

private:
  link& link_of(const std::string& src_node, const std::string& dst_node);
  link& link_between(const std::string& from_cluster, const std::string& to_cluster);
  void advance(link& l);
  void reschedule(link& l);
  void arm_timeout(const std::shared_ptr<flow>& f, duration timeout);
  void on_drain(link& l, uint64_t gen);
  void complete(flow& f);
  void fail(flow& f, const std::string& why);
  void reachability_changed();
  std::string cluster_of(const std::string& node) const;

  sim_network* net_;
  std::unique_ptr<sim_timer> timer_;
  std::map<std::string, std::string> cluster_;
  std::map<std::string, sim_data_plane*> planes_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<link>> links_;
  std::map<std::pair<std::string, uint64_t>, std::shared_ptr<flow>> flows_;
  double local_rate_ = 800e9;
  wire_size_fn wire_size_;
  bool live_ = false;
  uint64_t live_seed_ = 1;
  std::shared_ptr<sim_frame_switch> switch_; ///< with live_: carries the frames
  data_plane_ptr attach_live(data_plane_config cfg, metrics& m, logger_ptr log);
};

using sim_data_fabric_ptr = std::shared_ptr<sim_data_fabric>;

/// The fabric behind `dp` when it is a simulated data plane (fluid or real), else null.
sim_data_fabric* sim_fabric_of(data_plane* dp);
/// The same for the real data plane in simulation only (sim_live_plane.cpp).
sim_data_fabric* live_fabric_of(data_plane* dp);

} // namespace prfaas
