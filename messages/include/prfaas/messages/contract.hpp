#pragma once

// The vocabulary of role contracts: what a role (an actor type reachable from other
// nodes) accepts, written as types so that the compiler checks both ends.
//
//   struct decode_role {
//     static constexpr std::string_view name = "decode_worker";
//     using accepts = contract::accepts<
//       contract::request<serving::DecodeOrder, serving::DecodeAccepted>,
//       contract::one_way<serving::Cancel>>;
//   };
//
// A sender holds a `remote_ref<decode_role>` (prfaas/runtime/role.hpp): its `send`
// takes only the role's one-way messages, its `request` only the role's requests, and
// the reply arrives parsed as the declared reply type. The role's actor answers through
// `dispatch<decode_role>(...)`, which does not compile unless every declared message has
// exactly one handler and every handler takes a declared message.
//
// Every entry is a protobuf message type; one message type appears at most once in a
// role.

#include <type_traits>

namespace prfaas::contract {

/// Answered with `Reply` (or an error).
template <class Request, class Reply> struct request {
  using message = Request;
  using reply = Reply;
};

/// Not answered; the sender learns nothing of its fate.
template <class Message> struct one_way { using message = Message; };

/// Sent either way: one-way when losing it is harmless, as a request when the sender
/// must know it arrived (the reply is an empty acknowledgement, `ack`).
template <class Message> struct acked { using message = Message; };

/// The reply of an `acked` message sent as a request: it arrived and was handled.
struct ack {};

template <class... Entries> struct accepts {};

namespace detail {

template <class Entry, class M>
inline constexpr bool entry_is = std::is_same_v<typename Entry::message, M>;

template <class Entry> struct entry_kind {
  static constexpr bool requested = false; // `request` entries
  static constexpr bool sendable = false;  // may go one-way
  static constexpr bool ackable = false;   // may go as a request answered by `ack`
};
template <class R, class P> struct entry_kind<request<R, P>> {
  static constexpr bool requested = true, sendable = false, ackable = false;
};
template <class M> struct entry_kind<one_way<M>> {
  static constexpr bool requested = false, sendable = true, ackable = false;
};
template <class M> struct entry_kind<acked<M>> {
  static constexpr bool requested = false, sendable = true, ackable = true;
};

template <class List, class M> struct find;
template <class M> struct find<accepts<>, M> { using type = void; };
template <class E, class... Es, class M> struct find<accepts<E, Es...>, M> {
  using type = std::conditional_t<entry_is<E, M>, E, typename find<accepts<Es...>, M>::type>;
};

template <class Entry> struct reply_of { using type = ack; };
template <class R, class P> struct reply_of<request<R, P>> { using type = P; };

} // namespace detail

/// The entry of `Role` for message `M`, or void.
template <class Role, class M>
using entry_t = typename detail::find<typename Role::accepts, M>::type;

template <class Role, class M> inline constexpr bool declares = !std::is_void_v<entry_t<Role, M>>;

/// `Role` takes `M` one-way.
template <class Role, class M>
inline constexpr bool takes_one_way = [] {
  if constexpr (declares<Role, M>)
    return detail::entry_kind<entry_t<Role, M>>::sendable;
  else
    return false;
}();

/// `Role` answers `M` as a request (with `reply_t<Role, M>`).
template <class Role, class M>
inline constexpr bool answers = [] {
  if constexpr (declares<Role, M>)
    return detail::entry_kind<entry_t<Role, M>>::requested ||
           detail::entry_kind<entry_t<Role, M>>::ackable;
  else
    return false;
}();

/// What `Role` answers to `M`: the declared reply, or `ack` for an acked message.
template <class Role, class M> using reply_t = typename detail::reply_of<entry_t<Role, M>>::type;

} // namespace prfaas::contract
