#include "prfaas/messages/membership.hpp"
#include "prfaas/messages/remote_message.hpp"

namespace prfaas {

bool address::parse(std::string_view text, address& out) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == text.size() ||
      text.find('/', slash + 1) != std::string_view::npos)
    return false;
  out.node = std::string{text.substr(0, slash)};
  out.actor = std::string{text.substr(slash + 1)};
  return true;
}

namespace {

class string_bulk final : public bulk_buffer {
public:
  explicit string_bulk(std::string s) : bytes_(std::move(s)) {}
  const std::byte* data() const noexcept override {
    return reinterpret_cast<const std::byte*>(bytes_.data());
  }
  size_t size() const noexcept override { return bytes_.size(); }

private:
  std::string bytes_;
};

class vector_bulk final : public bulk_buffer {
public:
  explicit vector_bulk(std::vector<std::byte> b) : bytes_(std::move(b)) {}
  const std::byte* data() const noexcept override { return bytes_.data(); }
  size_t size() const noexcept override { return bytes_.size(); }

private:
  std::vector<std::byte> bytes_;
};

} // namespace

bulk_ptr make_bulk(std::string bytes) {
  return std::make_shared<string_bulk>(std::move(bytes));
}

bulk_ptr make_bulk(std::vector<std::byte> bytes) {
  return std::make_shared<vector_bulk>(std::move(bytes));
}

bulk_ptr copy_bulk(const std::byte* data, size_t size) {
  return std::make_shared<vector_bulk>(std::vector<std::byte>(data, data + size));
}

const char* to_string(peer_state s) {
  switch (s) {
  case peer_state::up:
    return "up";
  case peer_state::suspect:
    return "suspect";
  case peer_state::down:
    return "down";
  }
  return "?";
}

} // namespace prfaas
