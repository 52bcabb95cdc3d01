#pragma once

// The architectures prfaas-gguf writes. Per architecture: the GGUF hyperparameters of
// each size, the vocabulary it uses by default, and which of the tensors llama.cpp
// creates for a user-built model (llama_model_init_from_user creates every optional
// tensor whose shape is valid) a real checkpoint of that architecture does not carry.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct gguf_context;

namespace prfaas::gguf_tool {

enum class model_size { tiny, bench };

/// Writes "<arch>.<key>" entries into one GGUF context (not owned).
class arch_kv {
public:
  arch_kv(gguf_context* ctx, std::string arch) : ctx_(ctx), arch_(std::move(arch)) {}

  void u32(std::string_view key, uint32_t v);
  void f32(std::string_view key, float v);
  void boolean(std::string_view key, bool v);
  void u32_array(std::string_view key, const std::vector<uint32_t>& v);
  void i32_array(std::string_view key, const std::vector<int32_t>& v);

private:
  std::string key(std::string_view k) const;

  gguf_context* ctx_;
  std::string arch_;
};

/// Shape summary of one size, for --list and the tool's report.
struct shape_summary {
  uint32_t n_embd = 0;
  uint32_t n_layer = 0;
  uint32_t n_attention_layers = 0; ///< layers with a KV cache; the rest are recurrent
};

struct arch_info {
  std::string_view name;          ///< llama.cpp's name (general.architecture)
  std::string_view default_vocab; ///< vocabulary-only GGUF in llama.cpp's models/
  std::string_view layout;        ///< one line for --list
  /// No output.weight: the output layer reuses token_embd (llama.cpp duplicates it
  /// on load). Only for architectures whose loader treats output.weight as optional.
  bool tie_embeddings = true;
  /// Tensor base names ("blk.N." stripped) kept although the common drop list names them.
  std::vector<std::string_view> keep;
  /// Tensor base names dropped in addition to the common drop list.
  std::vector<std::string_view> drop;
  /// Sets every "<arch>.*" key except vocab_size and context_length.
  void (*hparams)(arch_kv& kv, model_size size);
  shape_summary (*summary)(model_size size);
};

/// Every supported architecture, in --list order.
const std::vector<arch_info>& arch_table();

/// nullptr when `name` is not supported.
const arch_info* find_arch(std::string_view name);

/// Whether `tensor` (a full name such as "blk.3.attn_q.bias") stays out of the file.
bool drops_tensor(const arch_info& arch, std::string_view tensor);

/// "blk.3.attn_q.bias" -> "attn_q.bias"; names outside a block are returned unchanged.
std::string_view tensor_base_name(std::string_view tensor);

/// Default context_length of a size (tiny 8192, bench 32768).
uint32_t default_context_length(model_size size);

} // namespace prfaas::gguf_tool
