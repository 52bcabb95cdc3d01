#pragma once

// The invariant checks of one chaos run (chaos_command.hpp lists what the system
// promises), one function per invariant, over what the run recorded: its requests as
// their clients saw them, the faults, the membership changes the gateway's node saw,
// and the world at quiescence. Each appends what it finds broken to a `violations`
// list and returns its part of the seed's JSON report.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chaos_schedule.hpp"
#include "common/engine_setup.hpp"
#include "gateway/sim_ingress.hpp"
#include "loadgen/workload.hpp"
#include "prfaas/engine/clock.hpp"
#include "prfaas/engine/engine.hpp"
#include "prfaas/messages/membership.hpp"
#include "prfaas/sim/sim_world.hpp"

namespace prfaas::sim::chaos {

/// One request as its client saw it.
struct tracked {
  loadgen::request_spec spec;
  std::shared_ptr<serving::accepted_request> a;
  double accepted_s = 0;
  double ended_s = -1;
  bool tail = false;
  std::string gateway; ///< the node the client connected to
  /// Its gateway crashed or was down: the client saw the connection fail.
  bool connection_lost = false;
  bool ok = false;
  int status = 0;
  std::string error;
  std::vector<serving::token> tokens;
  uint32_t completion_tokens = 0;
};

/// A membership change the gateway's node published, at run time `t_s`.
struct membership_seen {
  double t_s;
  std::string peer;
  peer_state state;
};

/// A node that failed (crash, pause) while the gateway's node had it up.
struct failure {
  double t_s;
  std::string node;
  double latency_s; ///< one way to the gateway's node: the last heartbeat arrives that late
};

/// What a run's checks found broken (the first 50 are kept).
struct violations {
  std::vector<std::string> list;
  void operator()(std::string what) {
    if (list.size() < 50)
      list.push_back(std::move(what));
  }
};

std::string fmt(double v); ///< three decimals

/// The tokens an undisturbed engine gives each request, computed once per request.
class token_oracle {
public:
  explicit token_oracle(const serving::model_settings& model);
  ~token_oracle();
  const std::vector<serving::token>& expected(size_t i, const tracked& t);

private:
  std::unique_ptr<engine::manual_clock> clock_;
  std::unique_ptr<engine::engine> engine_;
  std::map<size_t, std::vector<serving::token>> tokens_;
};

/// Every accepted request ended exactly once, before its deadline, with the oracle's
/// tokens (or, failed, a prefix of them). Returns outcomes, failures (the first 20),
/// deadline_in_state, ok, lost, duplicated.
nlohmann::json check_requests(const std::vector<tracked>& reqs, token_oracle& oracle,
                              double request_timeout_s, violations& v);

/// Every request sent after the faults healed (the tail) succeeded.
void check_progress(const std::vector<tracked>& reqs, size_t tail_requests, violations& v);

/// A gateway's crash reaches its own clients only.
void check_gateway_isolation(const std::vector<fault>& faults, const std::vector<tracked>& reqs,
                             violations& v);

/// Every failure was reported down within `bound_s` (plus its link's latency when the
/// bound is not zero). Returns the detections.
nlohmann::json check_detection(const std::vector<failure>& failures,
                               const std::vector<membership_seen>& seen, double bound_s,
                               violations& v);

/// Nothing held at quiescence: live requests, queued or active work, waiting
/// cross-node requests, open transfers, actors beyond `baseline_actors`.
nlohmann::json check_quiescence(sim_world& w, size_t baseline_actors, violations& v);

} // namespace prfaas::sim::chaos
