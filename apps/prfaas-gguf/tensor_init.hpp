#pragma once

// Initial values of the random weights. Every value is a function of (seed, tensor
// name, index) alone: no std:: distribution (their output is implementation-defined),
// and each 1M-value chunk has its own stream, so the bytes do not depend on the
// standard library or on how many threads fill the tensor.

#include <cstdint>
#include <span>
#include <string_view>

namespace prfaas::gguf_tool {

/// Fills `out` with tensor `name`'s values:
///  * norm weights ("...norm...")        1 (llama.cpp's norms multiply by the weight)
///  * ssm_a (state decay A, must be < 0) -U(1, 16), as Mamba/GDN's A_log init
///  * ssm_d (Mamba skip D)               1
///  * ssm_dt.bias                        softplus^-1 of dt ~ logU(1e-3, 1e-1)
///  * everything else                    normal(0, stdev)
/// Chunks are filled on up to `n_threads` threads (0 = hardware concurrency).
void fill_tensor(std::string_view name, uint64_t seed, float stdev, std::span<float> out,
                 unsigned n_threads = 1);

} // namespace prfaas::gguf_tool
