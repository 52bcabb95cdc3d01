#include "prefill/kv_messages.hpp"

#include <algorithm>
#include <cstring>

namespace prfaas::serving {

kv_messages::kv_messages(data_plane& dp, uint64_t transfer_id, uint32_t group, uint64_t cap,
                         std::chrono::milliseconds wait, std::function<bool()> stale)
    : dp_(dp), pool_(dp.send_pool()), id_(transfer_id), group_(std::max<uint32_t>(group, 1)),
      cap_(cap), wait_(wait), stale_(std::move(stale)) {}

void kv_messages::flush() {
  if (held_ == 0)
    return;
  if (stale()) {
    // dropped: the transfer is cancelled
  } else if (buf_) {
    dp_.push(id_, std::move(buf_).share());
    ++pooled_;
  } else {
    dp_.push(id_, std::move(out_));
    ++unpooled_;
  }
  buf_ = pool_buffer{};
  out_ = {};
  held_ = 0;
}

void kv_messages::add(const engine::kv_chunk& c) {
  const size_t need = engine::serialized_size(c);
  if (held_ > 0 && size() + need > cap_)
    flush();
  if (held_ == 0 && pool_ && need <= pool_->buffer_bytes()) {
    buf_ = pool_->try_acquire();
    if (!buf_) {
      buf_ = pool_->acquire(wait_);
      waited_out_ += buf_ ? 0 : 1;
    }
  }
  if (buf_ && buf_.size() + need > buf_.capacity()) {
    // Outgrew its buffer: the rest of this message goes in a vector.
    out_.assign(buf_.data(), buf_.data() + buf_.size());
    buf_ = pool_buffer{};
  }
  if (buf_) {
    const size_t at = buf_.size();
    engine::serialize_into(c, buf_.writable().subspan(at, need));
    buf_.resize(at + need);
  } else {
    engine::serialize_append(c, out_);
  }
  if (++held_ >= group_)
    flush();
}

} // namespace prfaas::serving
