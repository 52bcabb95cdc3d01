#pragma once

// Builds a worker's engine from the deployment's `model:` section and the worker's
// own parameters (a worker may override the profile: PrfaaS nodes run H200, PD
// nodes H20). Every key is checked at config validation, with the key path in the
// error, so a bad model section stops the node with exit code 2 before it starts.
//
//   model:
//     name: prfaas-ref-hybrid         # served model id (GET /v1/models)
//     engine: reference | profile
//     block_tokens: 64                # prefix-cache block size
//     max_context: 131072             # longest prompt + output accepted
//     reference: { weight_seed: 1, d_model: 64, n_heads: 2, head_dim: 16,
//                  mlp_hidden: 128, layer_pattern: LLLFLLLF }
//     profile: configs/profiles/kimi-linear-1t-h200.yaml   # engine: profile
//     kv_scale: 0.001                 # profile engine: bytes moved per profiled byte
//     seed: 1                         # profile engine: content seed
//     kv_content: tokens | zeros      # profile engine: payload bytes (zeros: sizes only)
//     llama: { gguf: PATH, context: 4096, batch: 512, ubatch: 512, threads: 2 }
//                                     # engine: llama (a GGUF through llama.cpp)

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "prfaas/engine/engine.hpp"
#include "prfaas/engine/tokenizer.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/config.hpp"

namespace prfaas::serving {

struct model_settings {
  std::string name = "prfaas-ref-hybrid";
  std::string engine = "reference";
  uint32_t block_tokens = 64;
  uint32_t max_context = 131072;
  // reference engine
  uint64_t weight_seed = 1;
  uint32_t d_model = 64, n_heads = 2, head_dim = 16, mlp_hidden = 128;
  std::string layer_pattern = "LLLFLLLF";
  // profile engine
  std::string profile; ///< resolved path
  double kv_scale = 1.0;
  uint64_t seed = 1;
  bool kv_content = true; ///< false (kv_content: zeros): payloads are zeros of the right size
  // llama engine
  std::string gguf;     ///< resolved path
  uint32_t context = 0; ///< tokens per sequence (0: max_context)
  uint32_t batch = 512, ubatch = 512, threads = 2;
  /// Sequences resident in one engine's context; set by the worker that builds it
  /// (a decode worker: its max_batch; a prefill worker: its max_batch, the prompts it
  /// prefills together).
  uint32_t slots = 1;
  /// llama.cpp's extra buffer types (AMX, repacked layouts) for this worker's weights:
  /// its `extra_buffer_types` parameter.
  bool extra_buffer_types = false;
};

/// Reads `dep.model` with `profile_override` (a worker's `profile` parameter, may be
/// empty). Throws config_error naming `model.<key>` or `<worker_path>.profile`.
model_settings read_model(const deployment_config& dep, const std::string& profile_override = {},
                          const std::string& worker_path = {});

/// The engine for these settings; throws config_error when a profile does not load.
/// A profile engine spends its modeled time on `clk` (must outlive the engine).
std::unique_ptr<engine::engine> make_engine(const model_settings& m, const std::string& where,
                                            engine::clock& clk);
/// The same on the wall clock.
std::unique_ptr<engine::engine> make_engine(const model_settings& m, const std::string& where);

/// The tokenizer of the model's vocabulary (the gateway's): bytes for the reference and
/// profile engines, the GGUF's own for llama. Throws config_error naming the key.
std::unique_ptr<engine::tokenizer> make_tokenizer(const model_settings& m);

/// Wire bytes of a serialized engine chunk under these settings: a profile engine's
/// KV and state payloads stand for 1/kv_scale times their size, headers and the
/// sequence record for themselves. For the simulated data plane's link model.
std::function<double(std::span<const std::byte>)> wire_size_of(const model_settings& m);

/// The worker parameters shared by both worker types: its hardware's profile
/// (engine: profile) and its weight layout (engine: llama).
param_spec profile_param();
param_spec extra_buffer_types_param();

/// The model as the worker at `path` runs it: read_model with its own `profile` and
/// `extra_buffer_types`. Throws config_error naming the key.
model_settings worker_model(const deployment_config& dep, const actor_params& p,
                            const std::string& path);

/// A worker type's check_deployment: its model settings read and its engine built
/// (the profile loads), so a bad model section stops the node before it starts.
void check_worker_model(const std::string& path, const actor_params& p,
                        const deployment_config& dep);

} // namespace prfaas::serving
