#include "gguf_model.hpp"

#include "arch_table.hpp"
#include "llama_log.hpp"
#include "tensor_init.hpp"

#include <ggml.h>
#include <gguf.h>
#include <llama.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

namespace prfaas::gguf_tool {

namespace {

/// Raised inside write_model; its message is what write_model returns.
struct tool_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct gguf_deleter {
  void operator()(gguf_context* c) const { gguf_free(c); }
};
using gguf_ptr = std::unique_ptr<gguf_context, gguf_deleter>;

struct model_deleter {
  void operator()(llama_model* m) const { llama_model_free(m); }
};
using model_ptr = std::unique_ptr<llama_model, model_deleter>;

struct file_closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

/// Removes a path on scope exit unless release()d (temporary files of a failed write).
class remove_on_exit {
public:
  explicit remove_on_exit(std::string path) : path_(std::move(path)) {}
  ~remove_on_exit() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove(path_, ec);
    }
  }
  remove_on_exit(const remove_on_exit&) = delete;
  remove_on_exit& operator=(const remove_on_exit&) = delete;
  void release() { path_.clear(); }

private:
  std::string path_;
};

struct tensor_desc {
  std::string name;
  std::array<int64_t, GGML_MAX_DIMS> ne{};
};

std::optional<model_size> parse_size(const std::string& s) {
  if (s == "tiny")
    return model_size::tiny;
  if (s == "bench")
    return model_size::bench;
  return std::nullopt;
}

/// The llama_ftype of a --type; nullopt when unknown.
std::optional<llama_ftype> parse_type(const std::string& s) {
  if (s == "f32")
    return LLAMA_FTYPE_ALL_F32;
  if (s == "f16")
    return LLAMA_FTYPE_MOSTLY_F16;
  if (s == "q8_0")
    return LLAMA_FTYPE_MOSTLY_Q8_0;
  return std::nullopt;
}

std::string resolve_vocab(const model_spec& spec, const arch_info& arch) {
  if (!spec.vocab_path.empty())
    return spec.vocab_path;
  std::string dir = spec.vocab_dir;
#ifdef PRFAAS_GGUF_VOCAB_DIR
  if (dir.empty())
    dir = PRFAAS_GGUF_VOCAB_DIR;
#endif
  if (dir.empty())
    throw tool_error("no vocabulary: pass a vocabulary GGUF (default for " +
                     std::string(arch.name) + ": " + std::string(arch.default_vocab) +
                     " in llama.cpp's models/) or its directory");
  return dir + "/" + std::string(arch.default_vocab);
}

/// Copies every tokenizer.* key of `vocab` into `meta`; returns the token count.
uint32_t copy_tokenizer(gguf_context* meta, const gguf_context* vocab, const std::string& path) {
  const int64_t tokens = gguf_find_key(vocab, "tokenizer.ggml.tokens");
  if (tokens < 0 || gguf_get_kv_type(vocab, tokens) != GGUF_TYPE_ARRAY ||
      gguf_get_arr_type(vocab, tokens) != GGUF_TYPE_STRING)
    throw tool_error("vocabulary " + path + " has no tokenizer.ggml.tokens string array");
  // gguf_set_kv copies all keys with their types; drop the non-tokenizer ones first.
  gguf_ptr tok(gguf_init_empty());
  gguf_set_kv(tok.get(), vocab);
  std::vector<std::string> others;
  for (int64_t i = 0; i < gguf_get_n_kv(tok.get()); ++i)
    if (std::strncmp(gguf_get_key(tok.get(), i), "tokenizer.", 10) != 0)
      others.emplace_back(gguf_get_key(tok.get(), i));
  for (const auto& k : others)
    gguf_remove_key(tok.get(), k.c_str());
  gguf_set_kv(meta, tok.get());
  return static_cast<uint32_t>(gguf_get_arr_n(vocab, tokens));
}

/// The tensors, in llama.cpp's creation order, that the architecture's loader builds
/// for `meta`: every required tensor and every optional one whose shape is valid. The
/// loader allocates them (as F32) and hands each to `record`, which only notes name and
/// shape; the model is freed unrun, so their uninitialised contents are never read.
std::vector<tensor_desc> enumerate_tensors(gguf_context* meta, const llama_log_capture& log) {
  std::vector<tensor_desc> tensors;
  const auto record = [](ggml_tensor* t, void* ud) {
    tensor_desc d{t->name, {}};
    std::copy(std::begin(t->ne), std::end(t->ne), d.ne.begin());
    static_cast<std::vector<tensor_desc>*>(ud)->push_back(std::move(d));
  };
  llama_model_params params = llama_model_default_params();
  params.n_gpu_layers = 0;
  params.use_extra_bufts = false;
  const model_ptr model(llama_model_init_from_user(meta, record, &tensors, params));
  if (!model)
    throw tool_error("llama.cpp rejected the metadata: " + log.errors());
  // A tensor created more than once (TENSOR_DUPLICATED) is stored once.
  std::set<std::string> seen;
  std::vector<tensor_desc> unique;
  for (auto& t : tensors)
    if (seen.insert(t.name).second)
      unique.push_back(std::move(t));
  return unique;
}

/// Writes meta + the tensors as F32 GGUF, streaming one tensor at a time. Returns the
/// number of elements written.
uint64_t write_f32(const std::string& path, const gguf_context* meta,
                   const std::vector<tensor_desc>& tensors, const model_spec& spec) {
  gguf_ptr out(gguf_init_empty());
  gguf_set_kv(out.get(), meta);
  for (const auto& t : tensors) {
    ggml_tensor info;
    std::memset(&info, 0, sizeof(info));
    info.type = GGML_TYPE_F32;
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
      info.ne[d] = t.ne[d];
      info.nb[d] = d == 0 ? sizeof(float) : info.nb[d - 1] * info.ne[d - 1];
    }
    ggml_set_name(&info, t.name.c_str());
    gguf_add_tensor(out.get(), &info);
  }

  std::unique_ptr<std::FILE, file_closer> f(std::fopen(path.c_str(), "wb"));
  if (!f)
    throw tool_error("cannot create " + path + ": " + std::strerror(errno));
  if (!gguf_write_to_file_ptr(out.get(), f.get(), /*only_meta=*/true))
    throw tool_error("writing the GGUF header of " + path + " failed");
  // The data section: tensors in the order added, each padded to the alignment (the
  // offsets gguf_add_tensor assigned).
  const size_t align = gguf_get_alignment(out.get());
  const std::vector<char> zeros(align, 0);
  std::vector<float> data;
  uint64_t n_params = 0;
  for (const auto& t : tensors) {
    const int64_t n = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
    data.resize(static_cast<size_t>(n));
    fill_tensor(t.name, spec.seed, spec.stdev, data, /*n_threads=*/0);
    const size_t bytes = data.size() * sizeof(float);
    const size_t pad = (align - bytes % align) % align;
    if (std::fwrite(data.data(), 1, bytes, f.get()) != bytes ||
        std::fwrite(zeros.data(), 1, pad, f.get()) != pad)
      throw tool_error("writing " + path + " failed: " + std::strerror(errno));
    n_params += static_cast<uint64_t>(n);
  }
  if (std::fclose(f.release()) != 0)
    throw tool_error("writing " + path + " failed: " + std::strerror(errno));
  return n_params;
}

void quantize(const std::string& in, const std::string& out, llama_ftype ftype,
              const llama_log_capture& log) {
  llama_model_quantize_params qp = llama_model_quantize_default_params();
  qp.ftype = ftype;
  qp.nthread = 0; // hardware concurrency
  if (llama_model_quantize(in.c_str(), out.c_str(), &qp) != 0)
    throw tool_error("llama_model_quantize failed: " + log.errors());
}

/// Loads `path`'s metadata and tensor table (no weights) the way a user of the file
/// would; fills the report's shape fields.
void verify_loads(const std::string& path, model_report& r, const llama_log_capture& log) {
  llama_model_params params = llama_model_default_params();
  params.n_gpu_layers = 0;
  params.no_alloc = true;
  params.load_mode = LLAMA_LOAD_MODE_NONE; // no_alloc asserts against mmap
  params.lazy_mode = LLAMA_LAZY_MODE_OFF;
  const model_ptr model(llama_model_load_from_file(path.c_str(), params));
  if (!model)
    throw tool_error("the written file does not load: " + log.errors());
  r.n_vocab = static_cast<uint32_t>(llama_vocab_n_tokens(llama_model_get_vocab(model.get())));
  r.n_embd = static_cast<uint32_t>(llama_model_n_embd(model.get()));
  r.n_layer = static_cast<uint32_t>(llama_model_n_layer(model.get()));
  r.n_ctx_train = static_cast<uint32_t>(llama_model_n_ctx_train(model.get()));
}

void write_model_or_throw(const model_spec& spec, const std::string& out_path,
                          model_report& report) {
  const arch_info* arch = find_arch(spec.arch);
  if (arch == nullptr)
    throw tool_error("unsupported architecture '" + spec.arch + "'");
  const auto size = parse_size(spec.size);
  if (!size)
    throw tool_error("unknown size '" + spec.size + "' (tiny or bench)");
  const auto ftype = parse_type(spec.type);
  if (!ftype)
    throw tool_error("unknown type '" + spec.type + "' (f32, f16 or q8_0)");
  if (!(spec.stdev > 0.0f && spec.stdev < 1e3f))
    throw tool_error("stdev must be positive and finite");

  report.vocab_path = resolve_vocab(spec, *arch);
  const gguf_ptr vocab(gguf_init_from_file(report.vocab_path.c_str(), {true, nullptr}));
  if (!vocab)
    throw tool_error("cannot read vocabulary " + report.vocab_path);

  gguf_ptr meta(gguf_init_empty());
  const std::string name = spec.name.empty() ? "prfaas-" + spec.size + "-" + spec.arch : spec.name;
  gguf_set_val_str(meta.get(), "general.architecture", std::string(arch->name).c_str());
  gguf_set_val_str(meta.get(), "general.name", name.c_str());
  gguf_set_val_u32(meta.get(), "general.file_type", LLAMA_FTYPE_ALL_F32);
  arch_kv kv(meta.get(), std::string(arch->name));
  const uint32_t n_vocab = copy_tokenizer(meta.get(), vocab.get(), report.vocab_path);
  kv.u32("vocab_size", n_vocab);
  kv.u32("context_length", spec.n_ctx_train ? spec.n_ctx_train : default_context_length(*size));
  arch->hparams(kv, *size);

  llama_backend_init();
  const llama_log_capture log;
  std::vector<tensor_desc> tensors;
  for (auto& t : enumerate_tensors(meta.get(), log))
    if (!drops_tensor(*arch, t.name))
      tensors.push_back(std::move(t));

  // Temporaries beside the output, unique per process: concurrent writers of the same
  // model each rename a complete file into place.
  const std::string partial = out_path + ".partial-" + std::to_string(::getpid());
  remove_on_exit drop_partial(partial);
  if (*ftype == LLAMA_FTYPE_ALL_F32) {
    report.n_params = write_f32(partial, meta.get(), tensors, spec);
  } else {
    const std::string f32_path = partial + ".f32";
    remove_on_exit drop_f32(f32_path);
    report.n_params = write_f32(f32_path, meta.get(), tensors, spec);
    quantize(f32_path, partial, *ftype, log);
  }
  verify_loads(partial, report, log);

  std::error_code ec;
  std::filesystem::rename(partial, out_path, ec);
  if (ec)
    throw tool_error("cannot rename " + partial + " to " + out_path + ": " + ec.message());
  drop_partial.release();
  report.file_bytes = std::filesystem::file_size(out_path, ec);
  const shape_summary s = arch->summary(*size);
  report.n_attention_layers = s.n_attention_layers;
}

} // namespace

std::string write_model(const model_spec& spec, const std::string& out_path, model_report* report) {
  model_report r;
  try {
    write_model_or_throw(spec, out_path, r);
  } catch (const std::exception& e) {
    return e.what();
  }
  if (report != nullptr)
    *report = r;
  return "";
}

std::vector<std::string> supported_archs() {
  std::vector<std::string> out;
  for (const auto& a : arch_table())
    out.emplace_back(a.name);
  return out;
}

} // namespace prfaas::gguf_tool
