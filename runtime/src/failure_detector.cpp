#include "prfaas/runtime/failure_detector.hpp"

namespace prfaas {

failure_detector::failure_detector(failure_detector_config cfg) : cfg_(cfg) {}

void failure_detector::add_peer(const std::string& peer) {
  peers_.try_emplace(peer);
}

std::vector<membership_event> failure_detector::heard(const std::string& peer, uint64_t incarnation,
                                                      time_point now, uint64_t fence_ack) {
  std::vector<membership_event> out;
  auto i = peers_.find(peer);
  if (i == peers_.end())
    return out;
  auto& p = i->second;
  if (incarnation < p.incarnation) {
    ++stale_;
    return out;
  }
  if (incarnation > p.incarnation && p.incarnation != 0 && p.state != peer_state::down) {
    auto silent = std::chrono::duration_cast<duration>(now - p.last_heard).count();
    out.push_back({peer, p.incarnation, peer_state::down, silent});
    p.state = peer_state::down;
  }
  if (incarnation > p.incarnation)
    p.downs = 0; // a new process: nothing to acknowledge
  else if (p.state == peer_state::down && fence_ack < p.downs) {
    ++unacked_; // alive, but not yet told it was declared down: it stays down
    p.last_heard = now;
    return out;
  }
  p.incarnation = incarnation;
  p.last_heard = now;
  if (p.state != peer_state::up) {
    p.state = peer_state::up;
    out.push_back({peer, incarnation, peer_state::up, 0});
  }
  return out;
}

std::vector<membership_event> failure_detector::tick(time_point now) {
  std::vector<membership_event> out;
  auto suspect_after = cfg_.interval * cfg_.suspect_misses;
  auto down_after = cfg_.interval * cfg_.misses;
  for (auto& [name, p] : peers_) {
    if (p.state == peer_state::down)
      continue;
    auto silent = std::chrono::duration_cast<duration>(now - p.last_heard);
    if (silent >= down_after) {
      p.state = peer_state::down;
      ++p.downs;
      out.push_back({name, p.incarnation, peer_state::down, silent.count()});
    } else if (silent >= suspect_after && p.state == peer_state::up) {
      p.state = peer_state::suspect;
      out.push_back({name, p.incarnation, peer_state::suspect, silent.count()});
    }
  }
  return out;
}

peer_state failure_detector::state(const std::string& peer) const {
  auto i = peers_.find(peer);
  return i == peers_.end() ? peer_state::down : i->second.state;
}

uint64_t failure_detector::incarnation(const std::string& peer) const {
  auto i = peers_.find(peer);
  return i == peers_.end() ? 0 : i->second.incarnation;
}

uint64_t failure_detector::downs(const std::string& peer) const {
  auto i = peers_.find(peer);
  return i == peers_.end() ? 0 : i->second.downs;
}

size_t failure_detector::up_count() const {
  size_t n = 0;
  for (auto& [_, p] : peers_)
    if (p.state != peer_state::down)
      ++n;
  return n;
}

} // namespace prfaas
