#include "prefill/prefill_queue.hpp"

#include <algorithm>

namespace prfaas::serving {

std::variant<prefill_queue::key, prefill_queue::refusal> prefill_queue::admit(const order& o) {
  if (fifo_.size() >= max_queue_)
    return refusal{"queue full (" + std::to_string(max_queue_) + ")"};
  // A queue it would wait in past its deadline is as full as a full one: refused now,
  // the gateway can try elsewhere or answer 429, rather than 504 later.
  if (tokens_per_s_ > 0 && o.budget.count() > 0) {
    const uint64_t ahead = work_ahead(o);
    const double wait_s = static_cast<double>(ahead + o.work) / tokens_per_s_;
    const double budget_s = std::chrono::duration<double>(o.budget).count();
    if (wait_s > budget_s)
      return refusal{std::to_string(ahead) + " tokens queued ahead, ~" +
                     std::to_string(static_cast<int>(wait_s)) +
                     " s of work, past the request's remaining " +
                     std::to_string(static_cast<int>(budget_s)) + " s"};
  }
  const key k = next_key_++;
  orders_.emplace(k, entry{o, o.pull_first ? phase::pulling : phase::queued});
  queued_tokens_ += o.work;
  if (!o.pull_first)
    enqueue(k);
  return k;
}

uint64_t prefill_queue::work_ahead(const order& o) const {
  uint64_t ahead = queued_tokens_;
  const double tag = start_tag(o);
  for (auto k : fifo_)
    if (auto& e = orders_.at(k); e.start_tag > tag)
      ahead -= std::min(ahead, e.o.work);
  return ahead;
}

double prefill_queue::start_tag(const order& o) const {
  auto f = finish_.find(o.origin);
  return std::max(virtual_time_, f == finish_.end() ? 0.0 : f->second);
}

void prefill_queue::enqueue(key k) {
  auto& e = orders_.at(k);
  e.start_tag = start_tag(e.o);
  finish_[e.o.origin] =
      e.start_tag + static_cast<double>(e.o.work) / (e.o.weight > 0 ? e.o.weight : 1.0);
  // After every order with a start tag at or below its own: arrival order among equals.
  auto at = std::upper_bound(fifo_.begin(), fifo_.end(), e.start_tag,
                             [this](double tag, key q) { return tag < orders_.at(q).start_tag; });
  fifo_.insert(at, k);
}

void prefill_queue::pull_ended(key k) {
  auto it = orders_.find(k);
  if (it == orders_.end() || it->second.ph != phase::pulling)
    return; // cancelled meanwhile, or not pulling
  it->second.ph = phase::queued;
  enqueue(k);
}

prefill_queue::step prefill_queue::next(clock_type::time_point now) {
  return next(now, batch_limit{});
}

prefill_queue::step prefill_queue::next(clock_type::time_point now, batch_limit limit) {
  step out;
  uint64_t tokens = 0;
  while (running_.empty() && !fifo_.empty() &&
         out.start.size() < std::max<size_t>(1, limit.orders)) {
    const key k = fifo_.front();
    auto& e = orders_.at(k);
    if (now >= e.o.deadline) {
      fifo_.pop_front();
      out.expired.push_back(k);
      remove(k);
      continue;
    }
    if (!out.start.empty() && tokens + e.o.work > limit.tokens)
      break; // it heads the next batch: nothing overtakes it
    fifo_.pop_front();
    e.ph = phase::running;
    e.transfer_open = true;
    virtual_time_ = std::max(virtual_time_, e.start_tag);
    tokens += e.o.work;
    out.start.push_back(k);
  }
  running_.insert(out.start.begin(), out.start.end());
  return out;
}

void prefill_queue::engine_done(key k, uint32_t computed, std::chrono::nanoseconds engine_time,
                                bool ok) {
  running_.erase(k);
  auto it = orders_.find(k);
  if (it == orders_.end() || it->second.ph != phase::running)
    return;
  auto& e = it->second;
  settle_work(e);
  if (ok && computed >= pace_min_tokens && engine_time.count() > 0) {
    const double seconds = std::chrono::duration<double>(engine_time).count();
    const double rate = computed / seconds;
    tokens_per_s_ =
        tokens_per_s_ > 0 ? (1 - pace_smoothing) * tokens_per_s_ + pace_smoothing * rate : rate;
    recent_.push_back({computed, seconds});
    if (recent_.size() > recent_kept)
      recent_.pop_front();
  }
  if (e.transfer_open)
    e.ph = phase::sent;
  else
    remove(k);
}

void prefill_queue::transfer_ended(key k) {
  auto it = orders_.find(k);
  if (it == orders_.end() || !it->second.transfer_open)
    return;
  it->second.transfer_open = false;
  if (it->second.ph == phase::sent)
    remove(k);
  // running: it leaves when the engine is done with it
}

prefill_queue::cancel_actions prefill_queue::cancel(const std::string& request_id,
                                                    uint64_t transfer_id) {
  cancel_actions out;
  std::vector<key> matching;
  for (auto& [k, e] : orders_)
    if (e.o.request_id == request_id && (transfer_id == 0 || transfer_id == e.o.transfer_id))
      matching.push_back(k);
  for (auto k : matching) {
    auto& e = orders_.at(k);
    if (e.ph == phase::pulling || e.ph == phase::queued) {
      if (e.ph == phase::queued)
        fifo_.erase(std::find(fifo_.begin(), fifo_.end(), k));
      out.removed.push_back(k);
      remove(k);
    } else if (e.transfer_open) {
      out.cancel_transfer.push_back(k);
    }
  }
  return out;
}

size_t prefill_queue::transferring() const {
  return static_cast<size_t>(std::count_if(orders_.begin(), orders_.end(),
                                           [](auto& kv) { return kv.second.transfer_open; }));
}

void prefill_queue::settle_work(entry& e) {
  queued_tokens_ -= std::min(queued_tokens_, e.o.work);
  e.o.work = 0;
}

void prefill_queue::remove(key k) {
  auto it = orders_.find(k);
  if (it == orders_.end())
    return;
  settle_work(it->second);
  orders_.erase(it);
}

} // namespace prfaas::serving
