#include "llama/identity.hpp"

#include "prfaas/engine/llama_engine.hpp"

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include <gguf.h>
#include <ggml.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace prfaas::engine::llama_detail {

namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// key → value of an identity text.
std::map<std::string, std::string> lines_of(std::string_view text) {
  std::map<std::string, std::string> out;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    const auto line = text.substr(0, eol);
    if (const auto colon = line.find(": "); colon != std::string_view::npos)
      out.emplace(line.substr(0, colon), line.substr(colon + 2));
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
  }
  return out;
}

} // namespace

result<std::string> file_identity(const std::string& path, const std::string& architecture,
                                  uint32_t n_layer) {
  // Weights: the whole file, hashed as it is read.
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f)
    return make_error(path + ": cannot open");
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> st(XXH3_createState(),
                                                                     &XXH3_freeState);
  XXH3_64bits_reset(st.get());
  std::vector<char> buf(size_t{4} << 20);
  uint64_t size = 0;
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0; size += n)
    XXH3_64bits_update(st.get(), buf.data(), n);
  if (std::ferror(f.get()))
    return make_error(path + ": read error");
  const uint64_t weights = XXH3_64bits_digest(st.get());

  // Vocabulary and quantisation: from the GGUF's metadata.
  gguf_init_params params{.no_alloc = true, .ctx = nullptr};
  std::unique_ptr<gguf_context, void (*)(gguf_context*)> g(
      gguf_init_from_file(path.c_str(), params), &gguf_free);
  if (!g)
    return make_error(path + ": not a GGUF file");
  std::string vocab = "none";
  if (const int64_t k = gguf_find_key(g.get(), "tokenizer.ggml.tokens");
      k >= 0 && gguf_get_kv_type(g.get(), k) == GGUF_TYPE_ARRAY) {
    XXH3_64bits_reset(st.get());
    const size_t n = gguf_get_arr_n(g.get(), k);
    for (size_t i = 0; i < n; ++i) {
      const char* t = gguf_get_arr_str(g.get(), k, i);
      XXH3_64bits_update(st.get(), t, std::strlen(t) + 1);
    }
    vocab = std::to_string(n) + " tokens, xxh3 " + hex(XXH3_64bits_digest(st.get()));
  }
  std::string file_type = "unset";
  if (const int64_t k = gguf_find_key(g.get(), "general.file_type"); k >= 0)
    file_type = std::to_string(gguf_get_val_u32(g.get(), k));
  std::map<std::string, int> types;
  for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i)
    ++types[ggml_type_name(gguf_get_tensor_type(g.get(), i))];
  std::string quant = "file_type " + file_type + ";";
  for (auto& [t, n] : types)
    quant += " " + t + "x" + std::to_string(n);

  return "state_format: llama.cpp " + std::string{llama_release()} +
         " sequence state, prfaas codec " + std::to_string(codec_version) + "\n" +
         "architecture: " + architecture + ", " + std::to_string(n_layer) + " layers\n" +
         "vocabulary: " + vocab + "\n" + "quantisation: " + quant + "\n" + "weights: xxh3 " +
         hex(weights) + " of " + std::to_string(size) + " bytes\n";
}

std::vector<std::byte> full_identity(const std::string& file_lines, const std::string& layout) {
  // The layout belongs to the architecture's line: it is what the weights' shapes and
  // the context's settings (flash attention, cache types) make of the state.
  auto lines = lines_of(file_lines);
  std::string text;
  for (const char* key :
       {"state_format", "architecture", "vocabulary", "quantisation", "weights"}) {
    text += std::string{key} + ": " + lines[key];
    if (std::string_view{key} == "architecture")
      text += "; state " + layout;
    text += "\n";
  }
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

std::string compare_identity(std::span<const std::byte> theirs, std::span<const std::byte> ours) {
  const auto as_text = [](std::span<const std::byte> b) {
    return std::string_view{reinterpret_cast<const char*>(b.data()), b.size()};
  };
  if (theirs.empty())
    return "the state carries no llama model identity (it comes from another engine)";
  const auto a = lines_of(as_text(theirs));
  const auto b = lines_of(as_text(ours));
  struct part {
    const char* key;
    const char* what;
  };
  for (auto [key, what] : {part{"state_format", "written by another llama.cpp or state codec"},
                           part{"architecture", "from another model architecture or state layout"},
                           part{"vocabulary", "from a model with another vocabulary"},
                           part{"quantisation", "from another quantisation"},
                           part{"weights", "from another model (the weights differ)"}}) {
    auto i = a.find(key);
    auto j = b.find(key);
    const std::string mine = j == b.end() ? "?" : j->second;
    if (i == a.end())
      return std::string{"state identity without "} + key + " (malformed identity)";
    if (i->second != mine)
      return std::string{"state "} + what + ": its " + key + " is \"" + i->second +
             "\", this engine's is \"" + mine + "\"";
  }
  return {};
}

} // namespace prfaas::engine::llama_detail
