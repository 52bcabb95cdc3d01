#include "prfaas/runtime/errors.hpp"

#include <caf/sec.hpp>

namespace prfaas {

const char* to_string(errc e) {
  switch (e) {
  case errc::none:
    return "none";
  case errc::request_timeout:
    return "request_timeout";
  case errc::peer_down:
    return "peer_down";
  case errc::unknown_actor:
    return "unknown_actor";
  case errc::unknown_type:
    return "unknown_type";
  case errc::unreachable:
    return "unreachable";
  case errc::overflow:
    return "overflow";
  case errc::remote_error:
    return "remote_error";
  case errc::bad_request:
    return "bad_request";
  case errc::shutting_down:
    return "shutting_down";
  case errc::escalated:
    return "escalated";
  case errc::overloaded:
    return "overloaded";
  case errc::cancelled:
    return "cancelled";
  case errc::bad_reply:
    return "bad_reply";
  case errc::request_unknown:
    return "request_unknown";
  case errc::transfer_failed:
    return "transfer_failed";
  }
  return "unknown";
}

caf::error make_error(errc code, std::string text) {
  return caf::error{static_cast<uint8_t>(code), error_category, caf::make_message(std::move(text))};
}

errc error_code(const caf::error& e) {
  if (e.category() == error_category)
    return static_cast<errc>(e.code());
  if (e.category() == caf::atom("system") &&
      static_cast<caf::sec>(e.code()) == caf::sec::request_timeout)
    return errc::request_timeout;
  return errc::remote_error;
}

std::string describe(const caf::error& e) {
  if (!e)
    return "ok";
  std::string text;
  if (e.category() == error_category) {
    text = to_string(static_cast<errc>(e.code()));
  } else {
    text = caf::to_string(e);
    return text;
  }
  auto& ctx = e.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0)) {
    text += ": ";
    text += ctx.get_as<std::string>(0);
  }
  return text;
}

} // namespace prfaas
