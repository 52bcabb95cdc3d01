#pragma once

// Internal to the llama engine: llama.cpp's process-wide set-up, the models loaded in
// this process (one llama_model per file and weight layout, shared by every engine and tokenizer
// that uses it: in an all-in-one node the prefill and decode workers and the gateway map the
// weights once), and what identifies a model file.

#include "prfaas/engine/llama_engine.hpp"
#include "prfaas/engine/result.hpp"

#include <memory>
#include <string>

struct llama_model;

namespace prfaas::engine::llama_detail {

/// A loaded model file. Frees the llama_model with the last reference.
struct loaded_model {
  llama_model* model = nullptr;
  std::string path;
  bool vocab_only = false;
  bool extra_buffer_types = false;
  gguf_facts facts;
  /// The file's identity without the state layout (see identity.hpp): format version,
  /// architecture, vocabulary, quantisation and weights. Empty for vocab-only loads.
  std::string identity_base;

  loaded_model() = default;
  loaded_model(const loaded_model&) = delete;
  loaded_model& operator=(const loaded_model&) = delete;
  ~loaded_model();
};

/// The model at `path`, loaded once per process and weight layout (and kept while
/// anyone holds it). `vocab_only`: the vocabulary and metadata, no weights (a
/// tokenizer's load). `extra_buffer_types`: the weights in llama.cpp's extra buffer
/// types (see llama_config); a second copy of them beside a plain load of the file.
result<std::shared_ptr<loaded_model>> load_model(const std::string& path, bool vocab_only,
                                                 bool extra_buffer_types = false);

/// llama_backend_init and the log hook, once per process. llama.cpp's messages below
/// warnings are dropped; the rest go to stderr prefixed "llama.cpp: ".
void init_backend();

} // namespace prfaas::engine::llama_detail
