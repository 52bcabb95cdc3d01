#include "llama/model_store.hpp"

#include "llama/identity.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <tuple>

#include <llama.h>

namespace prfaas::engine::llama_detail {

namespace {

void log_hook(ggml_log_level level, const char* text, void*) {
  if (level != GGML_LOG_LEVEL_WARN && level != GGML_LOG_LEVEL_ERROR)
    return;
  // The Qwen2-family vocabularies in llama.cpp's own models/ mark one token oddly and
  // llama.cpp corrects it on every load: a warning about the file, not about anything
  // an operator can act on, repeated for every engine and tokenizer.
  if (std::strstr(text, "control-looking token") != nullptr)
    return;
  std::fprintf(stderr, "llama.cpp: %s", text);
}

std::string meta_str(const llama_model* m, const char* key) {
  char buf[256];
  const int32_t n = llama_model_meta_val_str(m, key, buf, sizeof buf);
  return n < 0 ? std::string{}
               : std::string{buf, static_cast<size_t>(std::min<int32_t>(n, sizeof buf - 1))};
}

uint32_t meta_u32(const llama_model* m, const std::string& key) {
  const auto v = meta_str(m, key.c_str());
  try {
    return v.empty() ? 0 : static_cast<uint32_t>(std::stoul(v));
  } catch (const std::exception&) {
    return 0;
  }
}

/// A vocabulary-only load has the metadata but not the hyperparameters: read those
/// from the GGUF's keys. (A full load's hyperparameters say the same.)
gguf_facts facts_of(const llama_model* m, bool vocab_only) {
  gguf_facts f;
  f.architecture = meta_str(m, "general.architecture");
  f.name = meta_str(m, "general.name");
  const std::string a = f.architecture;
  f.n_ctx_train = vocab_only ? meta_u32(m, a + ".context_length")
                             : static_cast<uint32_t>(std::max(0, llama_model_n_ctx_train(m)));
  f.n_vocab = static_cast<uint32_t>(std::max(0, llama_vocab_n_tokens(llama_model_get_vocab(m))));
  f.n_layer = vocab_only ? meta_u32(m, a + ".block_count")
                         : static_cast<uint32_t>(std::max(0, llama_model_n_layer(m)));
  f.hybrid = llama_model_is_hybrid(m);
  f.recurrent = llama_model_is_recurrent(m);
  const uint32_t n_swa = vocab_only ? meta_u32(m, a + ".attention.sliding_window")
                                    : static_cast<uint32_t>(llama_model_n_swa(m));
  if (n_swa > 0)
    f.unsupported = "it uses sliding-window attention (window " + std::to_string(n_swa) +
                    "), whose KV prfaas cannot cut into reusable blocks";
  else if (llama_model_has_encoder(m))
    f.unsupported = "it is an encoder-decoder model";
  else if (llama_model_is_diffusion(m))
    f.unsupported = "it is a diffusion model";
  else if (f.n_vocab == 0)
    f.unsupported = "it has no vocabulary";
  return f;
}

} // namespace

loaded_model::~loaded_model() {
  if (model)
    llama_model_free(model);
}

void init_backend() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(log_hook, nullptr);
    llama_backend_init();
  });
}

result<std::shared_ptr<loaded_model>> load_model(const std::string& path, bool vocab_only,
                                                 bool extra_buffer_types) {
  init_backend();
  if (vocab_only)
    extra_buffer_types = false; // no weights to lay out
  static std::mutex mtx;
  static std::map<std::tuple<std::string, bool, bool>, std::weak_ptr<loaded_model>> loaded;
  std::error_code ec;
  const auto canonical = std::filesystem::weakly_canonical(path, ec).string();
  const auto key = std::tuple{ec ? path : canonical, vocab_only, extra_buffer_types};
  std::lock_guard<std::mutex> guard{mtx};
  if (auto it = loaded.find(key); it != loaded.end())
    if (auto m = it->second.lock())
      return m;
  if (!std::filesystem::is_regular_file(path, ec))
    return make_error(path + ": no such file");
  if (FILE* f = std::fopen(path.c_str(), "rb"))
    std::fclose(f);
  else
    return make_error(path + ": not readable");
  auto params = llama_model_default_params();
  params.vocab_only = vocab_only;
  params.n_gpu_layers = 0; // CPU; the tests need no GPU
  params.load_mode = LLAMA_LOAD_MODE_MMAP;
  // No extra buffer types (AMX, weight repacking) unless asked: their kernels depend on
  // the batch shape, and on a VM that advertises AMX without supporting it the AMX type
  // dies (SIGILL on a Q8_0 model's first decode) or fails its scheduler assert (an F16
  // Kimi Linear context). See docs/llama.md, "Batch invariance" and "Extra buffer types".
  params.use_extra_bufts = extra_buffer_types;
  auto m = std::make_shared<loaded_model>();
  m->path = path;
  m->vocab_only = vocab_only;
  m->extra_buffer_types = extra_buffer_types;
  m->model = llama_model_load_from_file(path.c_str(), params);
  if (!m->model)
    return make_error(path +
                      ": llama.cpp could not load it (not a GGUF, an architecture this "
                      "llama.cpp " +
                      std::string{llama_release()} +
                      " does not know, or damaged; see its message above)");
  m->facts = facts_of(m->model, vocab_only);
  if (!vocab_only) {
    auto id = file_identity(path, m->facts.architecture, m->facts.n_layer);
    if (!id)
      return id.err();
    m->identity_base = std::move(id).value();
  }
  loaded[key] = m;
  return m;
}

} // namespace prfaas::engine::llama_detail
