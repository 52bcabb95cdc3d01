#pragma once

// Prompt text for byte-level tokenisers (1 token = 1 byte): a prompt of L tokens is
// exactly L bytes, all printable ASCII and JSON-safe (no '"', '\\' or controls), and a
// pure function of its seed so a workload replays byte for byte.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace prfaas::loadgen {

/// Tokens per hash id in Mooncake traces.
inline constexpr size_t trace_block_tokens = 512;

/// `length` bytes determined by `seed` alone.
std::string random_text(uint64_t seed, size_t length);

/// The text of the trace block named `hash_id`, `length` bytes; equal ids give equal
/// text, and a shorter block is a prefix of the full one.
std::string block_text(uint64_t hash_id, size_t length);

/// A prompt of exactly `input_tokens` bytes made of blocks of `block_tokens`: block i
/// is block_text(hash_ids[i]), the last one cut to fit. Blocks past the end of
/// `hash_ids` get text unique to `fill_seed` (never equal to any hash id's block).
std::string block_prompt(const std::vector<uint64_t>& hash_ids, size_t input_tokens,
                         size_t block_tokens, uint64_t fill_seed);

} // namespace prfaas::loadgen
