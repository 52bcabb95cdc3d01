// The bulk path's queue-delay control (runtime/src/data_plane/delay_control.hpp) driven
// with samples, as the data plane takes them from TCP_INFO every 20 ms: a bottleneck
// that queues is paced down to just under its delivery rate and back up as the queue
// drains, a passing spike or a link that never queues is left unpaced, and the rate
// never probes far past what the path delivers.

#include <catch2/catch.hpp>

#include "delay_control.hpp"

namespace d = prfaas::detail;

namespace {

constexpr double mbit = 1e6;

d::delay_sample sample(double queue_ms, double delivered_mbit, uint32_t conns = 4) {
  return {.queue_delay_s = queue_ms / 1e3,
          .delivered_bps = delivered_mbit * mbit,
          .connections = conns,
          .interval_s = 0.02};
}

/// A bottleneck of `capacity_bps` with a queue: a sender above capacity fills it, one
/// below drains it; the path delivers at most capacity. step() moves 20 ms.
struct bottleneck {
  double capacity_bps;
  double queue_bits = 0;
  double delivered_bps = 0;

  d::delay_sample step(double send_bps, uint32_t conns = 4) {
    queue_bits = std::max(0.0, queue_bits + (send_bps - capacity_bps) * 0.02);
    delivered_bps = queue_bits > 0 ? capacity_bps : send_bps;
    return {.queue_delay_s = queue_bits / capacity_bps,
            .delivered_bps = delivered_bps,
            .connections = conns,
            .interval_s = 0.02};
  }
};

} // namespace

TEST_CASE("delay control: a link that never queues stays unpaced") {
  d::delay_control c{0.002};
  for (int i = 0; i < 500; ++i)
    CHECK(c.on_sample(sample(0.3, 20000)) == 0);
  // One or two samples over the target in a row (a busy CPU) do not engage it either.
  for (int i = 0; i < 100; ++i) {
    CHECK(c.on_sample(sample(i % 3 == 0 ? 0.1 : 4.0, 20000)) == 0);
  }
  CHECK(c.rate_bps() == 0);
}

TEST_CASE("delay control: a queue three samples in a row engages pacing under the delivery rate") {
  d::delay_control c{0.002};
  CHECK(c.on_sample(sample(10, 100)) == 0);
  CHECK(c.on_sample(sample(10, 100)) == 0);
  const double r = c.on_sample(sample(10, 100));
  CHECK(r == Approx(0.9 * 100 * mbit));
  // Held for 100 ms: the smoothed RTT still shows the old queue, no second cut.
  for (int i = 0; i < 4; ++i)
    CHECK(c.on_sample(sample(10, 100)) == r);
  // After the hold, a queue still over the target cuts in proportion to the excess:
  // 8 ms over a 2 ms + 3-gap target is most of the 100 ms drain window.
  const double cut = c.on_sample(sample(10, 100));
  CHECK(cut < r);
  CHECK(cut >= 0.5 * r);
}

TEST_CASE("delay control: on a bottleneck the queue stays near the target and the link busy") {
  for (double capacity_mbit : {8.0, 100.0, 1000.0}) {
    INFO("capacity " << capacity_mbit << " Mbit/s");
    d::delay_control c{0.002};
    bottleneck b{capacity_mbit * mbit};
    double send = 3 * capacity_mbit * mbit; // TCP unpaced fills the queue at first
    double delivered = 0, worst_queue_ms = 0;
    const int steps = 1500; // 30 s
    for (int i = 0; i < steps; ++i) {
      auto s = b.step(send);
      const double r = c.on_sample(s);
      send = r > 0 ? r : 3 * capacity_mbit * mbit;
      if (i >= steps / 2) { // settled
        delivered += b.delivered_bps;
        worst_queue_ms = std::max(worst_queue_ms, s.queue_delay_s * 1e3);
      }
    }
    const double utilisation = delivered / (steps / 2) / (capacity_mbit * mbit);
    CHECK(c.rate_bps() > 0);
    CHECK(utilisation > 0.9);
    // Under the target plus the delayed-ACK allowance at this rate, and a cut's overshoot.
    CHECK(worst_queue_ms < c.effective_target_s(4) * 1e3 + 5);
  }
}

TEST_CASE("delay control: the rate probes up, but not past 1.05 x the delivery rate") {
  d::delay_control c{0.002};
  for (int i = 0; i < 3; ++i)
    c.on_sample(sample(10, 100));
  REQUIRE(c.rate_bps() == Approx(90 * mbit));
  // The queue is gone: the rate grows 2% a sample ...
  c.on_sample(sample(0.1, 90));
  CHECK(c.rate_bps() > 90 * mbit);
  // ... up to 5% over what the path delivers, however long the queue stays empty.
  for (int i = 0; i < 200; ++i)
    c.on_sample(sample(0.1, 90));
  CHECK(c.rate_bps() <= 1.05 * 100 * mbit); // the smoothed delivery started at 100
  CHECK(c.rate_bps() >= 1.05 * 90 * mbit * 0.99);
  // A link that got faster: the delivery rate follows the cap up, and the cap follows it.
  double delivered = c.rate_bps() / mbit;
  for (int i = 0; i < 300; ++i) {
    c.on_sample(sample(0.1, delivered));
    delivered = c.rate_bps() / mbit;
  }
  CHECK(c.rate_bps() > 1000 * mbit);
}

TEST_CASE("delay control: reset returns to unpaced, and a zero target never paces") {
  d::delay_control c{0.002};
  for (int i = 0; i < 3; ++i)
    c.on_sample(sample(10, 100));
  REQUIRE(c.rate_bps() > 0);
  c.reset();
  CHECK(c.rate_bps() == 0);
  CHECK(c.on_sample(sample(10, 100)) == 0); // three in a row again before it engages
  d::delay_control off{0};
  for (int i = 0; i < 10; ++i)
    CHECK(off.on_sample(sample(50, 100)) == 0);
}

TEST_CASE("delay control: the target widens by the delayed-ACK gap at low rates") {
  d::delay_control c{0.002};
  CHECK(c.effective_target_s(4) == Approx(0.002)); // unpaced: the configured target
  for (int i = 0; i < 3; ++i)
    c.on_sample(sample(40, 8)); // 8 Mbit/s delivered: 7.2 paced, 1.8 per connection
  // Three 1500-byte packets at 1.8 Mbit/s per connection are 20 ms.
  CHECK(c.effective_target_s(4) == Approx(0.002 + 3 * 12000 / (7.2e6 / 4)));
  CHECK(c.effective_target_s(1) < c.effective_target_s(4));
}
