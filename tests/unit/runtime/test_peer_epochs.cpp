// Fencing's shared view of the peers (peer_epochs.hpp): stale and fenced incarnations,
// lifting a fence, notices counted once.

#include <catch2/catch.hpp>

#include "prfaas/runtime/peer_epochs.hpp"

using prfaas::peer_epochs;
using verdict = prfaas::peer_epochs::verdict;

TEST_CASE("peer epochs: an older incarnation than one heard is stale") {
  peer_epochs ep{{"a", "b"}};
  CHECK(ep.judge("a", 5) == verdict::accept);
  CHECK(ep.newest("a") == 5);
  CHECK(ep.judge("a", 4) == verdict::stale);
  CHECK(ep.judge("a", 6) == verdict::accept);
  CHECK(ep.judge("a", 5) == verdict::stale);
  CHECK(ep.newest("a") == 6);
  CHECK(ep.newest("b") == 0);
  CHECK(ep.judge("stranger", 1) == verdict::unknown);
  CHECK_FALSE(ep.note("a", 3));
  CHECK(ep.note("a", 9));
  CHECK(ep.newest("a") == 9);
}

TEST_CASE("peer epochs: a fenced incarnation is refused until lifted or replaced") {
  peer_epochs ep{{"a"}};
  ep.judge("a", 5);
  ep.fence("a", 5);
  CHECK(ep.is_fenced("a", 5));
  CHECK(ep.judge("a", 5) == verdict::fenced);
  ep.lift("a", 4); // an older incarnation's acknowledgement lifts nothing
  CHECK(ep.judge("a", 5) == verdict::fenced);
  ep.lift("a", 5);
  CHECK(ep.judge("a", 5) == verdict::accept);
  // A successor is never held by its predecessor's fence, and lifts it.
  ep.fence("a", 5);
  CHECK(ep.judge("a", 6) == verdict::accept);
  CHECK(ep.judge("a", 5) == verdict::stale);
  ep.lift("a", 6);
  CHECK_FALSE(ep.is_fenced("a", 5));
}

TEST_CASE("peer epochs: a notice is news once") {
  peer_epochs ep{{"a"}};
  CHECK(ep.notices("a") == 0);
  CHECK(ep.notice("a", 1));
  CHECK_FALSE(ep.notice("a", 1)); // the same notice, repeated in every heartbeat
  CHECK(ep.notices("a") == 1);
  CHECK(ep.notice("a", 3));
  CHECK_FALSE(ep.notice("a", 2));
  CHECK(ep.notices("a") == 3);
  CHECK_FALSE(ep.notice("stranger", 1));
  CHECK(ep.notices("stranger") == 0);
}
