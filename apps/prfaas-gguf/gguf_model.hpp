#pragma once

// Writes a random-weight GGUF model of a llama.cpp architecture that carries a real
// tokenizer vocabulary, through llama.cpp's public API only: the architecture's own
// loader (llama_model_init_from_user) says which tensors of which shapes the metadata
// implies, the weights are seeded normals, and llama_model_quantize makes the f16 and
// q8_0 variants. For tests (tiny: runs in seconds on two cores) and benchmarks (bench:
// shaped like a 0.5-1B model).

#include <cstdint>
#include <string>
#include <vector>

namespace prfaas::gguf_tool {

struct model_spec {
  std::string arch;          ///< llama.cpp architecture name; see supported_archs()
  std::string size = "tiny"; ///< "tiny" or "bench"
  /// Vocabulary-only GGUF whose tokenizer.* keys are copied. Empty: the arch's default
  /// file (e.g. ggml-vocab-qwen35.gguf) in vocab_dir.
  std::string vocab_path;
  /// Where default vocabularies live (llama.cpp's models/). Empty: the directory
  /// compiled in as PRFAAS_GGUF_VOCAB_DIR, if any.
  std::string vocab_dir;
  uint64_t seed = 1;  ///< same spec and seed -> byte-identical file
  float stdev = 0.1f; ///< standard deviation of the weight matrices
  /// "f32", "f16" or "q8_0": the weight matrices' type. f16/q8_0 come from
  /// llama_model_quantize, which keeps norms, biases, ssm_a/ssm_conv1d etc. in f32.
  std::string type = "f32";
  uint32_t n_ctx_train = 0; ///< <arch>.context_length; 0 = the size's default
  std::string name;         ///< general.name; empty = "prfaas-<size>-<arch>"
};

/// What write_model wrote, for the CLI's one-line report.
struct model_report {
  uint32_t n_vocab = 0;
  uint32_t n_embd = 0;
  uint32_t n_layer = 0;
  uint32_t n_attention_layers = 0;
  uint32_t n_ctx_train = 0;
  uint64_t n_params = 0; ///< elements of the tensors written
  uint64_t file_bytes = 0;
  std::string vocab_path;
};

/// Writes the model to out_path (through a temporary file beside it, renamed at the
/// end; nothing is left behind on failure). Returns "" on success or a message naming
/// what failed, with llama.cpp's last error when llama.cpp refused. Routes llama.cpp's
/// log through a capturing callback for the duration and restores the previous one
/// (not thread-safe: llama.cpp's logger is process-global).
std::string write_model(const model_spec& spec, const std::string& out_path,
                        model_report* report = nullptr);

/// The architectures write_model accepts, in a stable order.
std::vector<std::string> supported_archs();

} // namespace prfaas::gguf_tool
