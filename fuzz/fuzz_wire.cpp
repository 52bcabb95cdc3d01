// libFuzzer target: the decoders of everything a peer can put on the wire.
//
//   byte 0 (mod 3) picks the decoder, the rest is the frame:
//     0  a control-plane envelope (decode_frame: protobuf + every validity check),
//        once alone and once announcing a bulk frame;
//     1  a data-plane frame header (data_wire::decode); what decodes must encode
//        back to the same bytes and decode to the same header;
//     2  the "held chunks" list of a resume (data_wire::decode_held).
// Crashes, sanitizer reports and failed invariants (abort) are findings.

#include <cstdlib>
#include <cstring>

#include "prfaas/runtime/data_plane/frame.hpp"
#include "prfaas/runtime/messenger.hpp"

namespace {

void require(bool ok) {
  if (!ok)
    std::abort();
}

class fixed_bulk final : public prfaas::bulk_buffer {
public:
  explicit fixed_bulk(size_t n) : bytes_(n) {}
  const std::byte* data() const noexcept override { return bytes_.data(); }
  size_t size() const noexcept override { return bytes_.size(); }

private:
  std::vector<std::byte> bytes_;
};

void envelope(const std::byte* data, size_t size) {
  prfaas::transport_config cfg;
  cfg.max_envelope_bytes = 64 * 1024;
  cfg.max_bulk_bytes = 4096;
  for (size_t parts : {size_t{1}, size_t{2}}) {
    prfaas::inbound_frame f;
    f.peer = "peer";
    f.header = data;
    f.header_size = size;
    f.parts = parts;
    if (parts == 2)
      f.bulk = std::make_shared<fixed_bulk>(size % 5000);
    prfaas::wire::Envelope out;
    auto r = prfaas::decode_frame(f, "self", 42, cfg, out);
    if (r.ok) // what is accepted is addressed to us
      require(out.destination().node() == "self");
  }
}

void frame_header(const std::byte* data, size_t size) {
  prfaas::data_wire::decode_error err = prfaas::data_wire::decode_error::none;
  auto h = prfaas::data_wire::decode(data, size, err);
  require(h.has_value() == (err == prfaas::data_wire::decode_error::none));
  if (!h)
    return;
  auto again = prfaas::data_wire::encode(*h);
  require(again.size() <= size && std::memcmp(again.data(), data, again.size()) == 0);
  auto h2 = prfaas::data_wire::decode(reinterpret_cast<const std::byte*>(again.data()),
                                      again.size(), err);
  require(h2 && h2->id == h->id && h2->source == h->source && h2->sink == h->sink &&
          h2->k == h->k && h2->checksum == h->checksum);
}

void held(const std::byte* data, size_t size) {
  std::vector<prfaas::data_wire::held_chunk> out;
  if (!prfaas::data_wire::decode_held(data, size, out))
    return;
  auto again = prfaas::data_wire::encode_held(out);
  require(again.size() == size && std::memcmp(again.data(), data, size) == 0);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  auto* body = reinterpret_cast<const std::byte*>(data + 1);
  switch (data[0] % 3) {
  case 0:
    envelope(body, size - 1);
    break;
  case 1:
    frame_header(body, size - 1);
    break;
  default:
    held(body, size - 1);
    break;
  }
  return 0;
}
