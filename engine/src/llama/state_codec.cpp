#include "llama/state_codec.hpp"

#include <cstring>
#include <string>

namespace prfaas::engine::llama_codec {

namespace {

/// ggml's type ids stay well below this (GGML_TYPE_COUNT is about 40).
constexpr int32_t max_type = 256;
/// Cell extensions tried by discover(): none, or llama_kv_cell_ext (x, y, tok).
constexpr uint32_t ext_candidates[] = {0, 12};

/// Bounds-checked little-endian reads; `ok` turns false at the first overrun.
struct reader {
  bytes b;
  size_t at = 0;
  bool ok = true;

  template <class T> T get() {
    T v{};
    if (!ok || b.size() - at < sizeof(T)) {
      ok = false;
      return v;
    }
    std::memcpy(&v, b.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  const std::byte* take(uint64_t n) {
    if (!ok || b.size() - at < n) {
      ok = false;
      return nullptr;
    }
    const std::byte* p = b.data() + at;
    at += static_cast<size_t>(n);
    return p;
  }
  size_t left() const { return b.size() - at; }
};

template <class T> void put(std::vector<std::byte>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void append(std::vector<std::byte>& out, const std::byte* p, size_t n) {
  out.insert(out.end(), p, p + n);
}

error fail(const std::string& what) {
  return make_error("llama state: " + what);
}

/// The cells of a sequence's stream: one sequence each, at the positions 0..cells-1,
/// each once (cell_of_pos maps them back).
result<void> read_cells(reader& rd, const layout& lay, parsed_state& st, uint32_t cells) {
  if (cells > (1u << 24))
    return fail("KV section: " + std::to_string(cells) + " cells");
  st.n_cells = cells;
  st.cell_of_pos.assign(cells, UINT32_MAX);
  for (uint32_t c = 0; c < cells; ++c) {
    const auto pos = rd.get<int32_t>();
    const auto n_seq = rd.get<uint32_t>();
    rd.take(lay.cell_ext);
    rd.get<int32_t>(); // the sequence id it had; the importer uses its own
    if (!rd.ok)
      return fail("KV section truncated in cell " + std::to_string(c));
    if (n_seq != 1)
      return fail("KV cell " + std::to_string(c) + " shared by " + std::to_string(n_seq) +
                  " sequences");
    if (pos < 0 || static_cast<uint32_t>(pos) >= cells || st.cell_of_pos[pos] != UINT32_MAX)
      return fail("KV cell " + std::to_string(c) + " has position " + std::to_string(pos) +
                  " (positions must be 0.." + std::to_string(cells - 1) + ", each once)");
    st.cell_of_pos[pos] = c;
  }
  return {};
}

/// The layer header (V transposed or not, the layer count) and every layer's K rows.
result<void> read_k(reader& rd, layout& lay, parsed_state& st, uint32_t cells, bool learn) {
  const auto v_trans = rd.get<uint32_t>();
  const auto n_layer = rd.get<uint32_t>();
  if (!rd.ok || v_trans > 1 || n_layer == 0 || n_layer > 4096)
    return fail("KV section: bad layer header");
  if (learn) {
    lay.v_trans = v_trans == 1;
    lay.kv.assign(n_layer, {});
  } else if (lay.v_trans != (v_trans == 1) || lay.kv.size() != n_layer)
    return fail("KV section: " + std::to_string(n_layer) + " layers (v_trans " +
                std::to_string(v_trans) + "), the model has " + std::to_string(lay.kv.size()));
  st.k.assign(n_layer, nullptr);
  st.v.assign(n_layer, nullptr);
  for (uint32_t l = 0; l < n_layer; ++l) {
    const auto type = rd.get<int32_t>();
    const auto row = rd.get<uint64_t>();
    if (!rd.ok || type < 0 || type >= max_type || row == 0 || row > (1u << 24))
      return fail("KV layer " + std::to_string(l) + ": bad K header");
    auto& kl = lay.kv[l];
    if (learn) {
      kl.k_type = type;
      kl.k_row = row;
    } else if (kl.k_type != type || kl.k_row != row)
      return fail("KV layer " + std::to_string(l) + ": K type/row size differ from the model's");
    st.k[l] = rd.take(row * cells);
    if (!rd.ok)
      return fail("KV layer " + std::to_string(l) + ": K rows truncated");
  }
  return {};
}

/// Layer `l`'s V: rows, or (transposed) elements by dimension.
result<void> read_v(reader& rd, layout& lay, parsed_state& st, uint32_t l, uint32_t cells,
                    bool learn) {
  auto& kl = lay.kv[l];
  const auto type = rd.get<int32_t>();
  if (!rd.ok || type < 0 || type >= max_type)
    return fail("KV layer " + std::to_string(l) + ": bad V header");
  if (!lay.v_trans) {
    const auto row = rd.get<uint64_t>();
    if (!rd.ok || row == 0 || row > (1u << 24))
      return fail("KV layer " + std::to_string(l) + ": bad V row size");
    if (learn) {
      kl.has_v = true;
      kl.v_type = type;
      kl.v_row = row;
    } else if (kl.v_type != type || kl.v_row != row)
      return fail("KV layer " + std::to_string(l) + ": V type/row size differ from the model's");
    st.v[l] = rd.take(row * cells);
  } else {
    const auto el = rd.get<uint32_t>();
    const auto dims = rd.get<uint32_t>();
    if (!rd.ok || el == 0 || el > 64 || dims == 0 || dims > (1u << 20))
      return fail("KV layer " + std::to_string(l) + ": bad transposed V header");
    if (learn) {
      kl.has_v = true;
      kl.v_type = type;
      kl.v_el = el;
      kl.v_dims = dims;
    } else if (kl.v_type != type || kl.v_el != el || kl.v_dims != dims)
      return fail("KV layer " + std::to_string(l) + ": V type/size differ from the model's");
    st.v[l] = rd.take(uint64_t{el} * dims * cells);
  }
  if (!rd.ok)
    return fail("KV layer " + std::to_string(l) + ": V truncated");
  return {};
}

/// The stream `s` of `n_stream` that holds the sequence's `cells` cells.
result<void> read_stream(reader& rd, layout& lay, parsed_state& st, uint32_t cells, uint32_t s,
                         uint32_t n_stream, bool learn) {
  const size_t ext_at = rd.at;
  if (auto r = read_cells(rd, lay, st, cells); !r)
    return r;
  if (auto r = read_k(rd, lay, st, cells, learn); !r)
    return r;
  // V: every layer has it, or (MLA, V inside K) none has.
  for (uint32_t l = 0; l < lay.kv.size(); ++l) {
    // Learning from a probe whose KV section is known to end here: only the empty later
    // streams' counts left means no V at all (MLA keeps V inside K).
    if (learn && rd.left() == 4ull * (n_stream - 1 - s))
      break;
    if (!learn && !lay.kv[l].has_v)
      break;
    if (auto r = read_v(rd, lay, st, l, cells, learn); !r)
      return r;
  }
  if (learn) {
    size_t with_v = 0;
    for (auto& kl : lay.kv)
      with_v += kl.has_v ? 1 : 0;
    if (with_v != 0 && with_v != lay.kv.size())
      return fail("KV section: V in " + std::to_string(with_v) + " of " +
                  std::to_string(lay.kv.size()) + " layers (unsupported)");
  }
  st.ext = lay.cell_ext != 0 ? rd.b.data() + ext_at : nullptr;
  return {};
}

/// The attention KV section of one sequence, read against `lay` (discover passes a
/// layout whose layers it is still learning: `learn`).
result<void> read_kv(reader& rd, layout& lay, parsed_state& st, bool learn) {
  const auto n_stream = rd.get<uint32_t>();
  if (!rd.ok || n_stream == 0 || n_stream > 4096)
    return fail("KV section: bad stream count");
  if (learn)
    lay.n_stream = n_stream;
  else if (n_stream != lay.n_stream)
    return fail("KV section: " + std::to_string(n_stream) + " streams, the context has " +
                std::to_string(lay.n_stream));
  bool seen = false;
  for (uint32_t s = 0; s < n_stream; ++s) {
    const auto cells = rd.get<uint32_t>();
    if (!rd.ok)
      return fail("KV section truncated in stream " + std::to_string(s));
    if (cells == 0)
      continue;
    if (seen)
      return fail("KV section: a sequence's cells in two streams");
    seen = true;
    if (auto r = read_stream(rd, lay, st, cells, s, n_stream, learn); !r)
      return r;
  }
  if (!seen) {
    st.n_cells = 0;
    st.k.assign(lay.kv.size(), nullptr);
    st.v.assign(lay.kv.size(), nullptr);
  }
  return {};
}

/// The recurrent section of one sequence.
result<void> read_rec(reader& rd, layout& lay, parsed_state& st, bool learn) {
  const auto cells = rd.get<uint32_t>();
  if (!rd.ok || cells != 1)
    return fail("recurrent section: " + std::to_string(cells) + " cells (one per sequence)");
  st.rec_pos = rd.get<int32_t>();
  const auto n_seq = rd.get<uint32_t>();
  const auto s_trans = rd.get<uint32_t>();
  const auto n_layer = rd.get<uint32_t>();
  if (!rd.ok || st.rec_pos < 0 || n_seq != 0 || s_trans != 0 || n_layer == 0 || n_layer > 4096)
    return fail("recurrent section: bad header");
  if (learn)
    lay.rec_n_layer_total = n_layer;
  else if (n_layer != lay.rec_n_layer_total)
    return fail("recurrent section: " + std::to_string(n_layer) + " layers, the model has " +
                std::to_string(lay.rec_n_layer_total));
  if (learn) {
    // r rows of every recurrent layer, then s rows: entries to the end, half and half.
    std::vector<std::pair<int32_t, uint64_t>> entries;
    std::vector<const std::byte*> data;
    while (rd.left() > 0) {
      const auto type = rd.get<int32_t>();
      const auto row = rd.get<uint64_t>();
      if (!rd.ok || type < 0 || type >= max_type || row == 0 || row > (1u << 30))
        return fail("recurrent section: bad entry " + std::to_string(entries.size()));
      data.push_back(rd.take(row));
      if (!rd.ok)
        return fail("recurrent section: entry " + std::to_string(entries.size()) + " truncated");
      entries.emplace_back(type, row);
    }
    if (entries.empty() || entries.size() % 2 != 0 || entries.size() / 2 > n_layer)
      return fail("recurrent section: " + std::to_string(entries.size()) +
                  " entries (expected an r and an s per recurrent layer)");
    const size_t n = entries.size() / 2;
    lay.rec.assign(n, {});
    st.r.assign(n, nullptr);
    st.s.assign(n, nullptr);
    for (size_t l = 0; l < n; ++l) {
      lay.rec[l] = {entries[l].first, entries[l].second, entries[n + l].first,
                    entries[n + l].second};
      st.r[l] = data[l];
      st.s[l] = data[n + l];
    }
    return {};
  }
  st.r.assign(lay.rec.size(), nullptr);
  st.s.assign(lay.rec.size(), nullptr);
  for (int pass = 0; pass < 2; ++pass)
    for (size_t l = 0; l < lay.rec.size(); ++l) {
      const auto& rl = lay.rec[l];
      const auto type = rd.get<int32_t>();
      const auto row = rd.get<uint64_t>();
      const int32_t want_type = pass == 0 ? rl.r_type : rl.s_type;
      const uint64_t want_row = pass == 0 ? rl.r_row : rl.s_row;
      if (!rd.ok || type != want_type || row != want_row)
        return fail("recurrent layer " + std::to_string(l) + ": " + (pass == 0 ? "r" : "s") +
                    " type/row size differ from the model's");
      (pass == 0 ? st.r : st.s)[l] = rd.take(row);
      if (!rd.ok)
        return fail("recurrent layer " + std::to_string(l) + " truncated");
    }
  return {};
}

result<parsed_state> parse_with(layout& lay, bytes blob, bool learn) {
  parsed_state st;
  reader rd{blob};
  const auto magic = rd.get<uint32_t>();
  rd.get<int32_t>(); // the sequence it was read from
  if (!rd.ok || magic != lay.magic)
    return fail("not a sequence state of this llama.cpp (magic word " + std::to_string(magic) +
                ")");
  if (lay.has_kv) {
    if (auto r = read_kv(rd, lay, st, learn); !r)
      return r.err();
    st.length = st.n_cells;
  }
  if (lay.has_rec) {
    if (auto r = read_rec(rd, lay, st, learn); !r)
      return r.err();
    const auto rec_len = static_cast<uint32_t>(st.rec_pos) + 1;
    if (lay.has_kv && rec_len != st.length)
      return fail("recurrent state after " + std::to_string(rec_len) + " tokens but KV holds " +
                  std::to_string(st.length));
    st.length = rec_len;
  }
  if (rd.left() != 0)
    return fail(std::to_string(rd.left()) + " bytes past the end of the state");
  return st;
}

} // namespace

uint64_t layout::kv_payload(uint32_t l, uint64_t tokens) const {
  const auto& kl = kv[l];
  return tokens * ((l == 0 ? cell_ext : 0) + kl.k_row + kl.v_token_bytes());
}

uint64_t layout::rec_payload(uint32_t l) const {
  return rec[l].r_row + rec[l].s_row;
}

uint64_t layout::state_bytes(uint32_t n) const {
  uint64_t size = 64 + (has_rec ? rec_bytes() + 24 * rec.size() + 32 : 0);
  if (has_kv)
    size += uint64_t{n} * (16 + kv_bytes_per_token()) + 64 * kv.size() + 8 * n_stream;
  return size;
}

uint64_t layout::kv_bytes_per_token() const {
  uint64_t n = 0;
  for (uint32_t l = 0; l < n_full(); ++l)
    n += kv_payload(l, 1);
  return n;
}

uint64_t layout::rec_bytes() const {
  uint64_t n = 0;
  for (uint32_t l = 0; l < n_linear(); ++l)
    n += rec_payload(l);
  return n;
}

result<parsed_state> parse(const layout& lay, bytes blob) {
  layout copy = lay; // parse_with only reads it when not learning
  return parse_with(copy, blob, false);
}

result<parsed_state> parse_recurrent(const layout& lay, bytes blob) {
  layout rec_only = lay;
  rec_only.has_kv = false;
  return parse_with(rec_only, blob, false);
}

void export_kv(const layout& lay, const parsed_state& st, uint32_t l, uint32_t b, uint32_t e,
               std::vector<std::byte>& out) {
  const auto& kl = lay.kv[l];
  out.reserve(out.size() + lay.kv_payload(l, e - b));
  // Runs of consecutive cells for consecutive positions are copied in one go.
  auto rows = [&](const std::byte* base, uint64_t row) {
    for (uint32_t p = b; p < e;) {
      const uint32_t c0 = st.cell_of_pos[p];
      uint32_t n = 1;
      while (p + n < e && st.cell_of_pos[p + n] == c0 + n)
        ++n;
      append(out, base + uint64_t{c0} * row, static_cast<size_t>(row * n));
      p += n;
    }
  };
  if (l == 0 && lay.cell_ext != 0) { // cell extensions: inside the cell records
    const uint64_t stride = 12 + lay.cell_ext;
    for (uint32_t p = b; p < e; ++p)
      append(out, st.ext + uint64_t{st.cell_of_pos[p]} * stride + 8, lay.cell_ext);
  }
  rows(st.k[l], kl.k_row);
  if (!kl.has_v)
    return;
  if (!lay.v_trans) {
    rows(st.v[l], kl.v_row);
    return;
  }
  for (uint32_t d = 0; d < kl.v_dims; ++d)
    rows(st.v[l] + uint64_t{d} * st.n_cells * kl.v_el, kl.v_el);
}

void export_rec(const layout& lay, const parsed_state& st, uint32_t l,
                std::vector<std::byte>& out) {
  append(out, st.r[l], lay.rec[l].r_row);
  append(out, st.s[l], lay.rec[l].s_row);
}

namespace {

/// Every part has the size the layout gives it, and every full layer covers the length.
result<void> check_parts(const layout& lay, const state_parts& parts) {
  const uint32_t n = parts.length;
  if (n == 0)
    return fail("cannot build the state of an empty sequence");
  if (parts.kv.size() != lay.kv.size() || parts.rec.size() != lay.rec.size())
    return fail("parts for " + std::to_string(parts.kv.size()) + " full and " +
                std::to_string(parts.rec.size()) + " linear layers, the model has " +
                std::to_string(lay.kv.size()) + " and " + std::to_string(lay.rec.size()));
  for (uint32_t l = 0; l < lay.kv.size(); ++l) {
    uint64_t tokens = 0;
    for (auto& pc : parts.kv[l]) {
      if (pc.payload.size() != lay.kv_payload(l, pc.tokens))
        return fail("full layer " + std::to_string(l) + ": a piece of " +
                    std::to_string(pc.tokens) + " tokens has " + std::to_string(pc.payload.size()) +
                    " bytes, expected " + std::to_string(lay.kv_payload(l, pc.tokens)));
      tokens += pc.tokens;
    }
    if (tokens != n)
      return fail("full layer " + std::to_string(l) + " covers " + std::to_string(tokens) +
                  " tokens, the sequence has " + std::to_string(n));
  }
  for (uint32_t l = 0; l < lay.rec.size(); ++l)
    if (parts.rec[l].size() != lay.rec_payload(l))
      return fail("linear layer " + std::to_string(l) + ": " + std::to_string(parts.rec[l].size()) +
                  " bytes, expected " + std::to_string(lay.rec_payload(l)));
  return {};
}

/// Cell records: position, one sequence, extension (from full layer 0), seq id 0.
void write_cells(std::vector<std::byte>& out, const layout& lay, const state_parts& parts) {
  const uint64_t ext = lay.cell_ext;
  size_t chunk = 0, in_chunk = 0;
  for (uint32_t p = 0; p < parts.length; ++p) {
    put<int32_t>(out, static_cast<int32_t>(p));
    put<uint32_t>(out, 1);
    if (ext != 0) {
      while (in_chunk == parts.kv[0][chunk].tokens) {
        ++chunk;
        in_chunk = 0;
      }
      append(out, parts.kv[0][chunk].payload.data() + in_chunk * ext, static_cast<size_t>(ext));
      ++in_chunk;
    }
    put<int32_t>(out, 0);
  }
}

/// The KV section: one stream with the cells, every layer's K, then its V.
void write_kv(std::vector<std::byte>& out, const layout& lay, const state_parts& parts) {
  const uint64_t ext = lay.cell_ext;
  put<uint32_t>(out, lay.n_stream);
  put<uint32_t>(out, parts.length);
  write_cells(out, lay, parts);
  put<uint32_t>(out, lay.v_trans ? 1 : 0);
  put<uint32_t>(out, lay.n_full());
  for (uint32_t l = 0; l < lay.kv.size(); ++l) {
    const auto& kl = lay.kv[l];
    put<int32_t>(out, kl.k_type);
    put<uint64_t>(out, kl.k_row);
    for (auto& pc : parts.kv[l])
      append(out, pc.payload.data() + (l == 0 ? ext * pc.tokens : 0),
             static_cast<size_t>(kl.k_row * pc.tokens));
  }
  for (uint32_t l = 0; l < lay.kv.size(); ++l) {
    const auto& kl = lay.kv[l];
    if (!kl.has_v)
      continue;
    put<int32_t>(out, kl.v_type);
    if (!lay.v_trans) {
      put<uint64_t>(out, kl.v_row);
      for (auto& pc : parts.kv[l])
        append(out, pc.payload.data() + (l == 0 ? ext * pc.tokens : 0) + kl.k_row * pc.tokens,
               static_cast<size_t>(kl.v_row * pc.tokens));
    } else {
      put<uint32_t>(out, kl.v_el);
      put<uint32_t>(out, kl.v_dims);
      for (uint32_t d = 0; d < kl.v_dims; ++d)
        for (auto& pc : parts.kv[l])
          append(out,
                 pc.payload.data() + (l == 0 ? ext * pc.tokens : 0) + kl.k_row * pc.tokens +
                     uint64_t{d} * pc.tokens * kl.v_el,
                 static_cast<size_t>(uint64_t{kl.v_el} * pc.tokens));
    }
  }
  for (uint32_t s = 1; s < lay.n_stream; ++s)
    put<uint32_t>(out, 0);
}

/// The recurrent section: one cell at the last position, R then S of every layer.
void write_rec(std::vector<std::byte>& out, const layout& lay, const state_parts& parts) {
  put<uint32_t>(out, 1);
  put<int32_t>(out, static_cast<int32_t>(parts.length - 1));
  put<uint32_t>(out, 0);
  put<uint32_t>(out, 0);
  put<uint32_t>(out, lay.rec_n_layer_total);
  for (int pass = 0; pass < 2; ++pass)
    for (uint32_t l = 0; l < lay.rec.size(); ++l) {
      const auto& rl = lay.rec[l];
      put<int32_t>(out, pass == 0 ? rl.r_type : rl.s_type);
      put<uint64_t>(out, pass == 0 ? rl.r_row : rl.s_row);
      append(out, parts.rec[l].data() + (pass == 0 ? 0 : rl.r_row),
             static_cast<size_t>(pass == 0 ? rl.r_row : rl.s_row));
    }
}

} // namespace

result<void> build_into(const layout& lay, const state_parts& parts, std::vector<std::byte>& out) {
  if (auto ok = check_parts(lay, parts); !ok)
    return ok.err();
  out.clear();
  out.reserve(static_cast<size_t>(lay.state_bytes(parts.length)));
  put<uint32_t>(out, lay.magic);
  put<int32_t>(out, 0);
  if (lay.has_kv)
    write_kv(out, lay, parts);
  if (lay.has_rec)
    write_rec(out, lay, parts);
  return {};
}

namespace {

/// The check that matters for a candidate layout: the probe, parsed and rebuilt from
/// its parts, is the same bytes.
result<void> rebuilds_exactly(const layout& lay, bytes full) {
  auto check = parse(lay, full);
  if (!check)
    return check.err();
  state_parts parts;
  parts.length = check->length;
  std::vector<std::vector<std::byte>> storage;
  storage.reserve(lay.kv.size() + lay.rec.size());
  for (uint32_t l = 0; l < lay.kv.size(); ++l) {
    storage.emplace_back();
    export_kv(lay, *check, l, 0, check->length, storage.back());
    parts.kv.push_back({{storage.back(), check->length}});
  }
  for (uint32_t l = 0; l < lay.rec.size(); ++l) {
    storage.emplace_back();
    export_rec(lay, *check, l, storage.back());
    parts.rec.push_back(storage.back());
  }
  auto rebuilt = build(lay, parts);
  if (!rebuilt)
    return rebuilt.err();
  // The probe is sequence 0 of a fresh context: stream 0, cells in position order, seq
  // id 0 — exactly what build() writes. Anything else is a format we misread.
  if (rebuilt->size() != full.size() || std::memcmp(rebuilt->data(), full.data(), full.size()) != 0)
    return fail("the probe state rebuilt from its parts differs from the original (" +
                std::to_string(rebuilt->size()) + " vs " + std::to_string(full.size()) +
                " bytes): this llama.cpp writes a state format prfaas does not know");
  return {};
}

/// The layout the probe state has if its cells carry `lay.cell_ext` extension bytes
/// (`tail`: a hybrid model's recurrent part, at the state's end).
result<void> learn_sections(layout& lay, bytes full, bytes tail, size_t header) {
  parsed_state st;
  size_t at = header;
  if (lay.has_kv) {
    // The KV section is the whole state, or (hybrid) the part before the recurrent one.
    reader kv_rd{full.first(full.size() - tail.size())};
    kv_rd.at = header;
    auto r = read_kv(kv_rd, lay, st, true);
    if (!r)
      return r;
    if (kv_rd.left() != 0)
      return fail("KV section: " + std::to_string(kv_rd.left()) + " bytes left over");
    if (st.n_cells < 2)
      return fail("the probe sequence needs at least two tokens");
    at = kv_rd.at;
  }
  if (lay.has_rec) {
    reader rec_rd{full.subspan(at)};
    if (auto r = read_rec(rec_rd, lay, st, true); !r)
      return r;
  }
  return rebuilds_exactly(lay, full);
}

} // namespace

result<layout> discover(bytes full, bytes partial, bool hybrid, bool recurrent_only) {
  constexpr size_t header = 8; // magic, seq id
  if (full.size() < header || (hybrid && partial.size() < header))
    return fail("probe state too short");
  uint32_t magic = 0;
  std::memcpy(&magic, full.data(), 4);
  const bytes tail = hybrid ? partial.subspan(header) : bytes{};
  if (hybrid &&
      (std::memcmp(partial.data(), full.data(), header) != 0 || tail.empty() ||
       tail.size() >= full.size() - header ||
       std::memcmp(full.data() + full.size() - tail.size(), tail.data(), tail.size()) != 0))
    return fail("a hybrid model's state does not end with its recurrent part");
  result<layout> last = fail("no cell layout fits the probe state");
  for (uint32_t ext : ext_candidates) {
    layout lay;
    lay.magic = magic;
    lay.has_kv = !recurrent_only;
    lay.has_rec = hybrid || recurrent_only;
    lay.cell_ext = ext;
    if (auto r = learn_sections(lay, full, tail, header); !r) {
      last = r.err();
      continue;
    }
    return lay;
  }
  return last;
}

} // namespace prfaas::engine::llama_codec
