#pragma once

// An actor that throws crashes: its supervisor restarts it (one-for-one). This turns
// the exception into the actor's exit reason and logs it on the node's logger, in the
// node's format, instead of CAF's default handler printing to stderr.

#include <exception>
#include <string>

#include <caf/scheduled_actor.hpp>

#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/node_context.hpp"

namespace prfaas {

inline void log_crashes(caf::scheduled_actor* self, node_context* ctx, std::string name) {
  self->set_exception_handler(
      [ctx, name = std::move(name)](caf::scheduled_actor*, std::exception_ptr& e) -> caf::error {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          what = x.what();
        } catch (...) {
        }
        ctx->log()->error("actor_crashed actor={} error=\"{}\"", name, what);
        return make_error(errc::remote_error, name + " crashed: " + what);
      });
}

} // namespace prfaas
