#pragma once

// Both ends of a role contract (prfaas/messages/contract.hpp), checked by the compiler.
//
// Sending, through a typed handle that takes only what the role declares:
//
//   remote_ref<decode_role> d{ctx.msgr(), ctx.local("gw"), {"pd-0", "d0"}};
//   d.send(cancel);                                   // a declared one-way message
//   d.request(self, order, 2s).then(
//     [](serving::DecodeAccepted& a) { ... },         // the declared reply, parsed
//     [](caf::error& e) { ... });                     // timeout, peer down, remote error,
//                                                     // or a reply that is not a DecodeAccepted
//
// Answering, in the role's actor, with one handler per declared message:
//
//   [=](remote_message& msg) -> caf::result<remote_message> {
//     return dispatch<decode_role>(*ctx, msg,
//       [&](serving::DecodeOrder& o) -> answer<serving::DecodeAccepted> { ... },
//       [&](serving::Cancel& c) { ... },              // one-way: returns nothing
//       ...);
//   }
//
// A request handler returns the declared reply (or `with_bulk` of it), a caf::error, a
// reply_promise of the declared reply (answered later), or an `answer` (any of those). Handlers
// take the message, or the message and the remote_message it came in (source, bulk frame).

#include <chrono>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "prfaas/messages/contract.hpp"
#include "prfaas/runtime/remote.hpp"

namespace prfaas {

/// A reply of type `Reply` to be delivered later (the handler returned it).
template <class Reply> class reply_promise {
public:
  reply_promise() = default;
  template <class Self>
  reply_promise(Self* self, const remote_message& request)
      : rp_(self->template make_response_promise<remote_message>()), replier_(request.destination),
        requester_(request.source) {}

  void deliver(const Reply& r, bulk_ptr bulk = {}) {
    rp_.deliver(make_remote(replier_, requester_, r, std::move(bulk)));
  }
  void deliver(caf::error e) { rp_.deliver(std::move(e)); }
  bool pending() const { return rp_.pending(); }
  /// What the handler returns to CAF.
  caf::result<remote_message> result() const { return rp_; }

private:
  caf::typed_response_promise<remote_message> rp_;
  address replier_;
  address requester_;
};

/// A reply with a bulk frame (sent as its own frame, never copied by the transport).
template <class Reply> struct with_bulk {
  Reply reply;
  bulk_ptr bulk;
};

/// What a request handler may return when it answers in more than one way.
template <class Reply> class answer {
public:
  answer(Reply r) : v_(std::move(r)) {}                // NOLINT: implicit by design
  answer(caf::error e) : v_(std::move(e)) {}           // NOLINT
  answer(reply_promise<Reply> p) : v_(std::move(p)) {} // NOLINT

  caf::result<remote_message> to_result(const remote_message& request) && {
    if (auto* r = std::get_if<Reply>(&v_))
      return make_reply(request, *r);
    if (auto* e = std::get_if<caf::error>(&v_))
      return std::move(*e);
    return std::get<reply_promise<Reply>>(v_).result();
  }

private:
  std::variant<Reply, caf::error, reply_promise<Reply>> v_;
};

namespace role_detail {

template <class> inline constexpr bool always_false = false;

/// Hands the reply to `f` parsed as `Reply`; anything else goes to `g` as an error.
template <class Reply, class F, class G> void on_reply(remote_message& m, F& f, G& g) {
  if constexpr (std::is_same_v<Reply, contract::ack>) {
    f();
  } else {
    Reply r;
    if (!parse_remote(m, r)) {
      caf::error e =
          make_error(errc::bad_reply, m.source.to_string() + " answered " +
                                          (m.type.empty() ? "nothing" : m.type) + " where " +
                                          Reply::descriptor()->full_name() + " was due");
      g(e);
      return;
    }
    if constexpr (std::is_invocable_v<F&, Reply&, remote_message&>)
      f(r, m);
    else
      f(r);
  }
}

} // namespace role_detail

/// A request on its way; `then` takes the handlers of its typed reply and of an error.
template <class Reply, class Handle> class reply_handle {
public:
  explicit reply_handle(Handle h) : h_(std::move(h)) {}

  template <class F, class G> void then(F f, G g) {
    // The reply path keeps its own copy of `g` (argument evaluation order is unspecified:
    // moving `g` into the second argument could run first).
    auto on_reply = [f = std::move(f), g_copy = g](remote_message& m) mutable {
      role_detail::on_reply<Reply>(m, f, g_copy);
    };
    h_.then(std::move(on_reply), std::move(g));
  }

  /// The same, blocking (a scoped_actor's request: tools and benchmarks).
  template <class F, class G> void receive(F f, G g) {
    h_.receive([&f, &g](remote_message& m) { role_detail::on_reply<Reply>(m, f, g); }, g);
  }

private:
  Handle h_;
};

/// A message to an actor of `Role`, serialised once to be sent many times (replays and
/// benchmarks of the transport itself); `remote_ref<Role>` sends it.
template <class Role, class M> struct prepared { remote_message msg; };

template <class Role, class M>
prepared<Role, M> prepare(address from, address to, const M& m, bulk_ptr bulk = {}) {
  static_assert(contract::declares<Role, M>,
                "prfaas contract: the role does not declare this message "
                "(see Role::accepts in prfaas/messages/<role>.hpp)");
  return {make_remote(std::move(from), std::move(to), m, std::move(bulk))};
}

/// The address of an actor of `Role`, seen from a sender; sends only what `Role` takes.
template <class Role> class remote_ref {
public:
  remote_ref(messenger& msgr, address from, address to)
      : msgr_(&msgr), from_(std::move(from)), to_(std::move(to)) {}

  const address& to() const { return to_; }

  /// One-way; never blocks.
  template <class M> send_status send(const M& m, bulk_ptr bulk = {}) const {
    static_assert(contract::takes_one_way<Role, M>,
                  "prfaas contract: the role does not declare this message as one-way "
                  "(see Role::accepts in prfaas/messages/<role>.hpp)");
    return msgr_->send_oneway(make_remote(from_, to_, m, std::move(bulk)));
  }

  /// A message prepared once (see `prepare`), sent one-way.
  template <class M> send_status send(const prepared<Role, M>& p) const {
    static_assert(contract::takes_one_way<Role, M>,
                  "prfaas contract: the role does not declare this message as one-way "
                  "(see Role::accepts in prfaas/messages/<role>.hpp)");
    return msgr_->send_oneway(p.msg);
  }

  /// A message prepared once (see `prepare`), sent as a request.
  template <class M, class Self>
  auto request(Self* self, const prepared<Role, M>& p, std::chrono::nanoseconds timeout) const {
    static_assert(contract::answers<Role, M>,
                  "prfaas contract: the role does not declare this message as a request "
                  "(see Role::accepts in prfaas/messages/<role>.hpp)");
    auto h = request_remote(self, *msgr_, p.msg, timeout);
    return reply_handle<contract::reply_t<Role, M>, decltype(h)>{std::move(h)};
  }

  /// A request with a deadline; always answered (reply, remote error, peer_down,
  /// request_timeout).
  template <class M, class Self>
  auto request(Self* self, const M& m, std::chrono::nanoseconds timeout, bulk_ptr bulk = {}) const {
    static_assert(contract::answers<Role, M>,
                  "prfaas contract: the role does not declare this message as a request "
                  "(see Role::accepts in prfaas/messages/<role>.hpp)");
    auto h = request_remote(self, *msgr_, make_remote(from_, to_, m, std::move(bulk)), timeout);
    return reply_handle<contract::reply_t<Role, M>, decltype(h)>{std::move(h)};
  }

private:
  messenger* msgr_;
  address from_;
  address to_;
};

/// The handle of `to` as an actor of `Role`, for the local actor `self_name`.
template <class Role>
remote_ref<Role> role_ref(node_context& ctx, const std::string& self_name, address to) {
  return remote_ref<Role>(ctx.msgr(), ctx.local(self_name), std::move(to));
}

namespace role_detail {

template <class M, class H>
inline constexpr bool handles =
    std::is_invocable_v<H&, M&, remote_message&> || std::is_invocable_v<H&, M&>;

template <class M, class H> decltype(auto) call(H& h, M& m, remote_message& msg) {
  if constexpr (std::is_invocable_v<H&, M&, remote_message&>)
    return h(m, msg);
  else
    return h(m);
}

template <class Accepts, class H> struct takes_some;
template <class... Es, class H>
struct takes_some<contract::accepts<Es...>, H>
    : std::bool_constant<(handles<typename Es::message, H> || ...)> {};

template <class Reply, class T>
caf::result<remote_message> to_result(const remote_message& request, T&& out) {
  using U = std::decay_t<T>;
  if constexpr (std::is_same_v<U, Reply>)
    return make_reply(request, out);
  else if constexpr (std::is_same_v<U, with_bulk<Reply>>)
    return make_reply(request, out.reply, out.bulk);
  else if constexpr (std::is_same_v<U, caf::error>)
    return std::forward<T>(out);
  else if constexpr (std::is_same_v<U, reply_promise<Reply>>)
    return out.result();
  else if constexpr (std::is_same_v<U, answer<Reply>>)
    return std::move(out).to_result(request);
  else
    static_assert(
        always_false<U>,
        "prfaas contract: a request handler returns its declared reply (or with_bulk of it), "
        "a caf::error, a reply_promise or an answer of that reply");
}

template <class Entry, class M, class H>
caf::result<remote_message> run(H& h, M& m, remote_message& msg) {
  using R = decltype(call(h, m, msg));
  if constexpr (requires { typename Entry::reply; }) {
    static_assert(!std::is_void_v<R>, "prfaas contract: a request's handler must answer it");
    return to_result<typename Entry::reply>(msg, call(h, m, msg));
  } else {
    static_assert(std::is_void_v<R>,
                  "prfaas contract: a one-way (or acked) message's handler returns nothing");
    call(h, m, msg);
    return remote_message{};
  }
}

template <class Entry, class... Hs>
bool try_entry(remote_message& msg, std::optional<caf::result<remote_message>>& out, Hs&... hs) {
  using M = typename Entry::message;
  static_assert(((handles<M, Hs> ? 1 : 0) + ... + 0) == 1,
                "prfaas contract: every message the role declares has exactly one handler");
  if (msg.type != M::descriptor()->full_name())
    return false;
  M m;
  if (!m.ParseFromString(msg.payload)) {
    out.emplace(make_error(errc::bad_request, "a " + msg.type + " from " + msg.source.to_string() +
                                                  " that does not parse (" +
                                                  std::to_string(msg.payload.size()) + " bytes)"));
    return true;
  }
  (
      [&] {
        if constexpr (handles<M, Hs>)
          out.emplace(run<Entry>(hs, m, msg));
      }(),
      ...);
  return true;
}

template <class... Es, class... Hs>
std::optional<caf::result<remote_message>> dispatch(contract::accepts<Es...>, remote_message& msg,
                                                    Hs&... hs) {
  std::optional<caf::result<remote_message>> out;
  (try_entry<Es>(msg, out, hs...) || ...);
  return out;
}

} // namespace role_detail

/// Answers `msg` with the handler of its declared type; a type `Role` does not declare
/// is refused (errc::unknown_type, counted). Compiles only when every declared message
/// has exactly one handler and every handler takes a declared message.
template <class Role, class... Handlers>
caf::result<remote_message> dispatch(node_context& ctx, remote_message& msg, Handlers... hs) {
  static_assert((role_detail::takes_some<typename Role::accepts, Handlers>::value && ...),
                "prfaas contract: a handler takes a message the role does not declare");
  if (auto out = role_detail::dispatch(typename Role::accepts{}, msg, hs...))
    return std::move(*out);
  return unknown_type(ctx, msg);
}

} // namespace prfaas
