#pragma once

// Internal to the llama engine: a model's identity, as every exported sequence state
// carries it (model_info::identity, in the meta chunk). A text of "key: value" lines:
//
//   state_format   llama.cpp release and prfaas state codec version
//   architecture   general.architecture, layer counts, the state layout
//   vocabulary     token count and a hash of the tokens
//   quantisation   general.file_type and the tensor types
//   weights        a hash of the whole GGUF file
//
// Importing compares them in this order, so a state from another llama.cpp, another
// architecture, another vocabulary, another quantisation of the same model or another
// model altogether is refused with an error that says which.

#include "prfaas/engine/result.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace prfaas::engine::llama_detail {

/// The version of the chunk payload format of state_codec.hpp; bump when it changes.
inline constexpr int codec_version = 1;

/// The lines of a GGUF's identity besides the state layout (reads the whole file once
/// for its hash). An error names the file.
result<std::string> file_identity(const std::string& path, const std::string& architecture,
                                  uint32_t n_layer);

/// The full identity: the file's lines plus the state layout's description.
std::vector<std::byte> full_identity(const std::string& file_lines, const std::string& layout);

/// Empty when `theirs` (an exported identity) may be imported by an engine of `ours`;
/// otherwise the reason, naming the part that differs and both values.
std::string compare_identity(std::span<const std::byte> theirs, std::span<const std::byte> ours);

} // namespace prfaas::engine::llama_detail
