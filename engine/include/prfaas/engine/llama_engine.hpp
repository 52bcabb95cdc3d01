#pragma once

// The llama.cpp engine: real GGUF models (transformers, and the hybrid and recurrent
// architectures the paper is about: Kimi Linear, Qwen3.5, Qwen3-Next, Nemotron-H,
// Granite-4 hybrid, LFM2, Mamba2) behind the engine interface, and their vocabulary
// behind the tokenizer interface. Nothing here includes llama.h: the rest of prfaas
// knows only engine and tokenizer.

#include "prfaas/engine/engine.hpp"
#include "prfaas/engine/tokenizer.hpp"

#include <memory>
#include <string>

namespace prfaas::engine {

/// One engine instance: a llama_context over a (shared, memory-mapped) model.
struct llama_config {
  std::string gguf;      ///< the model file
  uint32_t context = 0;  ///< tokens one sequence may hold (0: the model's trained context)
  uint32_t batch = 512;  ///< n_batch: a prefill goes to llama_decode in slices of this many
  uint32_t ubatch = 512; ///< n_ubatch: llama.cpp's physical batch
  uint32_t threads = 2;  ///< n_threads and n_threads_batch
  uint32_t slots = 1;    ///< sequences resident in the context at once (llama seq ids);
                         ///< more are parked in host memory and swapped in on demand
  /// Load the weights into llama.cpp's extra buffer types where the CPU has them (AMX
  /// tiles, repacked Q4/IQ4 layouts): faster prompt processing on such CPUs, at the
  /// price of batch invariance (docs/llama.md). The state this engine exports imports
  /// into an engine without them, and the other way round: the KV and recurrent state
  /// are laid out alike.
  bool extra_buffer_types = false;
};

/// What a GGUF declares, read without its weights (for configuration checks).
struct gguf_facts {
  std::string architecture; ///< general.architecture
  std::string name;         ///< general.name (may be empty)
  uint32_t n_ctx_train = 0;
  uint32_t n_vocab = 0;
  uint32_t n_layer = 0;
  bool hybrid = false, recurrent = false;
  /// Empty when prfaas can serve it; otherwise why not (e.g. sliding-window attention,
  /// whose state the codec does not cut into blocks).
  std::string unsupported;
};

/// Reads a GGUF's facts; an error names the file and what is wrong with it.
result<gguf_facts> inspect_gguf(const std::string& path);

/// Empty when a model of this architecture may load its weights into extra buffer
/// types; otherwise why not (the pinned llama.cpp aborts on it).
std::string extra_buffer_types_refusal(const std::string& architecture);

/// The engine; an error names what failed (file, architecture, context size, ...).
result<std::unique_ptr<engine>> make_llama_engine(const llama_config& config);

/// The GGUF's tokenizer: its vocabulary only (no weights), its chat template.
result<std::unique_ptr<tokenizer>> make_llama_tokenizer(const std::string& gguf);

/// The llama.cpp release this build links (the pin of tools/llama-cpp.sh).
const char* llama_release();

} // namespace prfaas::engine
