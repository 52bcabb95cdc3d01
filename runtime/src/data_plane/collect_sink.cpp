// The data_plane interface's two conveniences over its virtual core: pushing a vector,
// and whole-transfer sinks built on stream sinks.

#include <map>
#include <utility>

#include "prfaas/runtime/data_plane.hpp"

namespace prfaas {

void data_plane::push(uint64_t id, std::vector<std::byte> chunk) {
  push(id, make_bulk(std::move(chunk)));
}

void data_plane::add_sink(const std::string& sink, sink_handler handler) {
  // Chunks of transfers still arriving, by (source, id). Only the data plane's thread
  // touches it (every handler runs there).
  using key = std::pair<std::string, uint64_t>;
  auto partial = std::make_shared<std::map<key, std::vector<bulk_ptr>>>();
  stream_handlers h;
  h.chunk = [partial](const inbound_ref& r, uint32_t, bulk_ptr bytes) {
    // A receive pool buffer is copied out, so that holding whole transfers never
    // keeps the pool from granting credit to other transfers.
    if (bytes && bytes->pooled())
      bytes = copy_bulk(bytes->data(), bytes->size());
    (*partial)[key{r.source, r.id}].push_back(std::move(bytes));
  };
  h.end = [partial, handler = std::move(handler)](received_transfer rt) {
    if (auto it = partial->find(key{rt.source, rt.id}); it != partial->end()) {
      rt.chunks = std::move(it->second);
      partial->erase(it);
    }
    handler(std::move(rt));
  };
  h.abort = [partial](const inbound_ref& r, const std::string&) {
    partial->erase(key{r.source, r.id});
  };
  add_stream_sink(sink, std::move(h));
}

} // namespace prfaas
