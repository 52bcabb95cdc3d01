#include "arch_table.hpp"

#include <gguf.h>

#include <algorithm>
#include <array>

namespace prfaas::gguf_tool {

std::string arch_kv::key(std::string_view k) const {
  std::string out = arch_;
  out += '.';
  out += k;
  return out;
}

void arch_kv::u32(std::string_view k, uint32_t v) {
  gguf_set_val_u32(ctx_, key(k).c_str(), v);
}

void arch_kv::f32(std::string_view k, float v) {
  gguf_set_val_f32(ctx_, key(k).c_str(), v);
}

void arch_kv::boolean(std::string_view k, bool v) {
  gguf_set_val_bool(ctx_, key(k).c_str(), v);
}

void arch_kv::u32_array(std::string_view k, const std::vector<uint32_t>& v) {
  gguf_set_arr_data(ctx_, key(k).c_str(), GGUF_TYPE_UINT32, v.data(), v.size());
}

void arch_kv::i32_array(std::string_view k, const std::vector<int32_t>& v) {
  gguf_set_arr_data(ctx_, key(k).c_str(), GGUF_TYPE_INT32, v.data(), v.size());
}

namespace {

template <class Shape> const Shape& pick(model_size size, const Shape& tiny, const Shape& bench) {
  return size == model_size::tiny ? tiny : bench;
}

// --- plain transformers (qwen2, llama) --------------------------------------------

struct dense_shape {
  uint32_t n_embd, n_layer, n_ff, n_head, n_head_kv;
  float rope_base, rms_eps;
};

void write_dense(arch_kv& kv, const dense_shape& s) {
  kv.u32("embedding_length", s.n_embd);
  kv.u32("block_count", s.n_layer);
  kv.u32("feed_forward_length", s.n_ff);
  kv.u32("attention.head_count", s.n_head);
  kv.u32("attention.head_count_kv", s.n_head_kv);
  kv.u32("rope.dimension_count", s.n_embd / s.n_head);
  kv.f32("rope.freq_base", s.rope_base);
  kv.f32("attention.layer_norm_rms_epsilon", s.rms_eps);
}

// bench mirrors Qwen2.5-0.5B (hidden 896, 24 layers, 14/2 heads of 64, ffn 4864).
constexpr dense_shape qwen2_tiny{64, 2, 192, 4, 2, 1e6f, 1e-6f};
constexpr dense_shape qwen2_bench{896, 24, 4864, 14, 2, 1e6f, 1e-6f};
// bench mirrors Llama-3.2-1B (hidden 2048, 16 layers, 32/8 heads of 64, ffn 8192),
// without its llama3 rope scaling.
constexpr dense_shape llama_tiny{64, 2, 192, 4, 2, 5e5f, 1e-5f};
constexpr dense_shape llama_bench{2048, 16, 8192, 32, 8, 5e5f, 1e-5f};

shape_summary dense_summary(const dense_shape& s) {
  return {s.n_embd, s.n_layer, s.n_layer};
}

void write_qwen2(arch_kv& kv, model_size size) {
  write_dense(kv, pick(size, qwen2_tiny, qwen2_bench));
}

shape_summary qwen2_summary(model_size size) {
  return dense_summary(pick(size, qwen2_tiny, qwen2_bench));
}

void write_llama(arch_kv& kv, model_size size) {
  write_dense(kv, pick(size, llama_tiny, llama_bench));
}

shape_summary llama_summary(model_size size) {
  return dense_summary(pick(size, llama_tiny, llama_bench));
}

// --- Gated DeltaNet hybrids (qwen35, qwen3next) ----------------------------------

// Every `interval`-th layer (1-based) is gated full attention, the others Gated
// DeltaNet with `ssm_k_heads` key heads and `ssm_v_heads` value heads of `ssm_state`.
struct gdn_shape {
  uint32_t n_embd, n_layer, n_ff, n_head, n_head_kv, head_dim, n_rot;
  std::array<int32_t, 4> rope_sections; // sums to n_rot / 2 (interleaved M-RoPE)
  uint32_t ssm_state, ssm_k_heads, ssm_v_heads, interval;
};

// bench mirrors Qwen3.5-0.8B: hidden 1024, 24 layers (every 4th attention), ffn 3584,
// 8/2 heads of 256 with partial rotary 0.25 and mrope sections 11/11/10, 16 key and 16
// value linear-attention heads of 128, conv kernel 4.
constexpr gdn_shape qwen35_tiny{64, 4, 192, 2, 1, 64, 16, {3, 3, 2, 0}, 32, 2, 4, 4};
constexpr gdn_shape qwen35_bench{1024, 24, 3584, 8, 2, 256, 64, {11, 11, 10, 0}, 128, 16, 16, 4};

void write_gdn(arch_kv& kv, const gdn_shape& s) {
  kv.u32("embedding_length", s.n_embd);
  kv.u32("block_count", s.n_layer);
  kv.u32("feed_forward_length", s.n_ff);
  kv.u32("attention.head_count", s.n_head);
  kv.u32("attention.head_count_kv", s.n_head_kv);
  kv.u32("attention.key_length", s.head_dim);
  kv.u32("attention.value_length", s.head_dim);
  kv.u32("rope.dimension_count", s.n_rot);
  kv.i32_array("rope.dimension_sections", {s.rope_sections.begin(), s.rope_sections.end()});
  kv.f32("rope.freq_base", 1e7f);
  kv.f32("attention.layer_norm_rms_epsilon", 1e-6f);
  kv.u32("ssm.conv_kernel", 4);
  kv.u32("ssm.state_size", s.ssm_state);
  kv.u32("ssm.group_count", s.ssm_k_heads);
  kv.u32("ssm.time_step_rank", s.ssm_v_heads);
  kv.u32("ssm.inner_size", s.ssm_state * s.ssm_v_heads);
  kv.u32("full_attention_interval", s.interval);
}

shape_summary gdn_summary(const gdn_shape& s) {
  return {s.n_embd, s.n_layer, s.n_layer / s.interval};
}

void write_qwen35(arch_kv& kv, model_size size) {
  write_gdn(kv, pick(size, qwen35_tiny, qwen35_bench));
}

shape_summary qwen35_summary(model_size size) {
  return gdn_summary(pick(size, qwen35_tiny, qwen35_bench));
}

// Qwen3-Next: the qwen35 layer pattern with a routed + shared-expert MoE in every layer.
struct moe_shape {
  uint32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
};
constexpr gdn_shape qwen3next_tiny = qwen35_tiny;
constexpr moe_shape qwen3next_tiny_moe{4, 2, 64, 64};
// bench: qwen35's bench trunk with 16 experts of 512 (4 routed) and a 512 shared expert
// (~1.0B parameters in all).
constexpr gdn_shape qwen3next_bench = qwen35_bench;
constexpr moe_shape qwen3next_bench_moe{16, 4, 512, 512};

void write_qwen3next(arch_kv& kv, model_size size) {
  write_gdn(kv, pick(size, qwen3next_tiny, qwen3next_bench));
  const moe_shape& m = pick(size, qwen3next_tiny_moe, qwen3next_bench_moe);
  kv.u32("expert_count", m.n_expert);
  kv.u32("expert_used_count", m.n_expert_used);
  kv.u32("expert_feed_forward_length", m.n_ff_exp);
  kv.u32("expert_shared_feed_forward_length", m.n_ff_shexp);
}

shape_summary qwen3next_summary(model_size size) {
  return gdn_summary(pick(size, qwen3next_tiny, qwen3next_bench));
}

// --- Kimi Linear: KDA + MLA, MoE -------------------------------------------------

// Every `mla_every`-th layer (1-based) is MLA attention, the others Kimi Delta
// Attention with n_head heads of kda_head_dim. Layers after the first are MoE (sigmoid
// gating with a selection bias, one shared expert); the first is a dense FFN of n_ff.
struct kimi_shape {
  uint32_t n_embd, n_layer, n_ff, n_head, kda_head_dim;
  uint32_t kv_lora_rank, qk_rope, qk_nope, v_head; // MLA head geometry
  uint32_t n_expert, n_expert_used, n_ff_exp, mla_every;
};

// bench: Kimi-Linear-48B-A3B's head geometry (KDA heads of 128; MLA kv_lora 512, rope
// 64, nope 128, v 128) on a ~0.9B trunk: hidden 1024, 16 layers, 32 experts of 256.
constexpr kimi_shape kimi_tiny{64, 4, 192, 2, 64, 64, 16, 32, 32, 4, 2, 64, 4};
constexpr kimi_shape kimi_bench{1024, 16, 3072, 16, 128, 512, 64, 128, 128, 32, 4, 256, 4};

void write_kimi(arch_kv& kv, model_size size) {
  const kimi_shape& s = pick(size, kimi_tiny, kimi_bench);
  kv.u32("embedding_length", s.n_embd);
  kv.u32("block_count", s.n_layer);
  kv.u32("feed_forward_length", s.n_ff);
  kv.u32("attention.head_count", s.n_head);
  // The converter's layout: MLA as MQA over the compressed cache (one KV head of
  // kv_lora_rank + qk_rope), n_head_kv 0 marking the KDA (recurrent) layers.
  std::vector<uint32_t> head_kv(s.n_layer);
  for (uint32_t il = 0; il < s.n_layer; ++il)
    head_kv[il] = (il + 1) % s.mla_every == 0 ? 1 : 0;
  kv.u32_array("attention.head_count_kv", head_kv);
  kv.u32("attention.key_length", s.kv_lora_rank + s.qk_rope);
  kv.u32("attention.value_length", s.kv_lora_rank);
  kv.u32("attention.key_length_mla", s.qk_nope + s.qk_rope);
  kv.u32("attention.value_length_mla", s.v_head);
  kv.u32("attention.kv_lora_rank", s.kv_lora_rank);
  kv.u32("rope.dimension_count", s.qk_rope);
  kv.f32("attention.layer_norm_rms_epsilon", 1e-5f);
  kv.u32("ssm.conv_kernel", 4);
  kv.u32("kda.head_dim", s.kda_head_dim);
  kv.u32("expert_count", s.n_expert);
  kv.u32("expert_used_count", s.n_expert_used);
  kv.u32("expert_feed_forward_length", s.n_ff_exp);
  kv.u32("expert_shared_count", 1);
  kv.u32("leading_dense_block_count", 1);
  kv.f32("expert_weights_scale", 2.446f);
  kv.boolean("expert_weights_norm", true);
  kv.u32("expert_gating_func", 2); // sigmoid
}

shape_summary kimi_summary(model_size size) {
  const kimi_shape& s = pick(size, kimi_tiny, kimi_bench);
  return {s.n_embd, s.n_layer, s.n_layer / s.mla_every};
}

// --- Mamba-2 SSM hybrids (mamba2, nemotron_h, granitehybrid) -----------------------

// A Mamba-2 mixer: d_inner channels in ssm_heads heads, n_group B/C groups of d_state.
struct mamba2_mixer {
  uint32_t d_inner, d_state, n_group, ssm_heads;
};

void write_mixer(arch_kv& kv, const mamba2_mixer& m) {
  kv.u32("ssm.conv_kernel", 4);
  kv.u32("ssm.inner_size", m.d_inner);
  kv.u32("ssm.state_size", m.d_state);
  kv.u32("ssm.group_count", m.n_group);
  kv.u32("ssm.time_step_rank", m.ssm_heads);
}

// Pure Mamba-2; bench mirrors mamba2-780m (d_model 1536, 48 layers, heads of 64).
struct mamba2_shape {
  uint32_t n_embd, n_layer;
  mamba2_mixer mixer;
};
constexpr mamba2_shape mamba2_tiny{64, 2, {128, 64, 1, 2}};
constexpr mamba2_shape mamba2_bench{1536, 48, {3072, 128, 1, 48}};

void write_mamba2(arch_kv& kv, model_size size) {
  const mamba2_shape& s = pick(size, mamba2_tiny, mamba2_bench);
  kv.u32("embedding_length", s.n_embd);
  kv.u32("block_count", s.n_layer);
  kv.u32("feed_forward_length", 0);
  kv.u32("attention.head_count", 0);
  kv.f32("attention.layer_norm_rms_epsilon", 1e-5f);
  write_mixer(kv, s.mixer);
}

shape_summary mamba2_summary(model_size size) {
  const mamba2_shape& s = pick(size, mamba2_tiny, mamba2_bench);
  return {s.n_embd, s.n_layer, 0};
}

// Hybrids described by one character per layer: 'M' Mamba-2 mixer, '*' attention,
// '-' MLP (nemotron_h keeps mixers, attention and MLPs in separate layers).
struct pattern_shape {
  uint32_t n_embd, n_ff, n_head, n_head_kv;
  std::string_view pattern;
  mamba2_mixer mixer;
};

uint32_t count(std::string_view pattern, char c) {
  return static_cast<uint32_t>(std::count(pattern.begin(), pattern.end(), c));
}

std::vector<uint32_t> per_layer(std::string_view pattern, char c, uint32_t yes) {
  std::vector<uint32_t> v;
  for (char p : pattern)
    v.push_back(p == c ? yes : 0);
  return v;
}

shape_summary pattern_summary(const pattern_shape& s) {
  return {s.n_embd, static_cast<uint32_t>(s.pattern.size()), count(s.pattern, '*')};
}

// Nemotron-H: bench is 4 x "M-M-M*-" (28 layers: 12 mixers, 12 relu^2 MLPs, 4 attention)
// at hidden 1536 with Nemotron-H's mixer geometry (8 groups of 128, heads of 64).
constexpr pattern_shape nemotron_tiny{64, 192, 4, 2, "M-*-", {128, 32, 2, 4}};
constexpr pattern_shape nemotron_bench{
    1536, 6144, 12, 4, "M-M-M*-M-M-M*-M-M-M*-M-M-M*-", {3072, 128, 8, 48}};

void write_nemotron(arch_kv& kv, model_size size) {
  const pattern_shape& s = pick(size, nemotron_tiny, nemotron_bench);
  kv.u32("embedding_length", s.n_embd);
  kv.u32("block_count", static_cast<uint32_t>(s.pattern.size()));
  kv.u32_array("feed_forward_length", per_layer(s.pattern, '-', s.n_ff));
  kv.u32("attention.head_count", s.n_head);
  kv.u32_array("attention.head_count_kv", per_layer(s.pattern, '*', s.n_head_kv));
  kv.u32("attention.key_length", s.n_embd / s.n_head);
  kv.u32("attention.value_length", s.n_embd / s.n_head);
  kv.f32("attention.layer_norm_epsilon", 1e-5f);
  kv.f32("attention.layer_norm_rms_epsilon", 1e-5f);
  write_mixer(kv, s.mixer);
}

shape_summary nemotron_summary(model_size size) {
  return pattern_summary(pick(size, nemotron_tiny, nemotron_bench));
}

// Granite 4.0-H: every layer has a dense SwiGLU FFN; its mixer is Mamba-2 ('M') or
// attention ('*'); d_inner must be 2 x n_embd. bench: hidden 1536, 24 layers (every
// 6th attention), 12/4 heads of 128. Granite's muP multipliers (embedding, residual,
// logit, attention scales) are left out: with random tied embeddings they make greedy
// decoding repeat the input token.
constexpr pattern_shape granite_tiny{64, 192, 4, 2, "MMM*", {128, 32, 1, 4}};
constexpr pattern_shape granite_bench{
    1536, 3072, 12, 4, "MMMMM*MMMMM*MMMMM*MMMMM*", {3072, 128, 1, 48}};

void write_granite(arch_kv& kv, model_size size) {
  const pattern_shape& s = pick(size, granite_tiny, granite_bench);
  kv.u32("embedding_length", s.n_embd);
  kv.u32("block_count", static_cast<uint32_t>(s.pattern.size()));
  kv.u32("feed_forward_length", s.n_ff);
  kv.u32("attention.head_count", s.n_head);
  kv.u32_array("attention.head_count_kv", per_layer(s.pattern, '*', s.n_head_kv));
  kv.f32("attention.layer_norm_rms_epsilon", 1e-5f);
  kv.f32("rope.freq_base", 1e7f);
  write_mixer(kv, s.mixer);
}

shape_summary granite_summary(model_size size) {
  return pattern_summary(pick(size, granite_tiny, granite_bench));
}

// LFM2: gated short-convolution layers ('C') and GQA attention ('*'), every layer with
// a SwiGLU FFN. bench mirrors LFM2-700M (hidden 1536, 16 layers, attention at 2, 5, 8,
// 10, 12, 14, 24/8 heads, ffn 6912, conv cache 3).
struct lfm2_shape {
  uint32_t n_embd, n_ff, n_head, n_head_kv;
  std::string_view pattern;
};
constexpr lfm2_shape lfm2_tiny{64, 192, 4, 2, "CC*C"};
constexpr lfm2_shape lfm2_bench{1536, 6912, 24, 8, "CC*CC*CC*C*C*C*C"};

void write_lfm2(arch_kv& kv, model_size size) {
  const lfm2_shape& s = pick(size, lfm2_tiny, lfm2_bench);
  kv.u32("embedding_length", s.n_embd);
  kv.u32("block_count", static_cast<uint32_t>(s.pattern.size()));
  kv.u32("feed_forward_length", s.n_ff);
  kv.u32("attention.head_count", s.n_head);
  kv.u32_array("attention.head_count_kv", per_layer(s.pattern, '*', s.n_head_kv));
  kv.f32("attention.layer_norm_rms_epsilon", 1e-5f);
  kv.f32("rope.freq_base", 1e6f);
  kv.u32("shortconv.l_cache", 3);
}

shape_summary lfm2_summary(model_size size) {
  const lfm2_shape& s = pick(size, lfm2_tiny, lfm2_bench);
  return {s.n_embd, static_cast<uint32_t>(s.pattern.size()), count(s.pattern, '*')};
}

// Optional tensors llama.cpp creates for a user-built model that the checkpoints of
// these architectures do not carry (base names; ".scale"/".input_scale" are checked
// as suffixes: llama.cpp's generic per-tensor NVFP4 scales).
// clang-format off
constexpr std::array<std::string_view, 12> common_drop{
    "rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight",
    "attn_q.bias",       "attn_k.bias",              "attn_v.bias",
    "attn_qkv.bias",     "attn_output.bias",         "ffn_gate.bias",
    "ffn_up.bias",       "ffn_down.bias",            "output.bias"};
// clang-format on

std::vector<arch_info> make_table() {
  std::vector<arch_info> t;
  t.push_back({
      .name = "qwen35",
      .default_vocab = "ggml-vocab-qwen35.gguf",
      .layout = "Gated DeltaNet + gated attention (3:1), dense FFN",
      .hparams = write_qwen35,
      .summary = qwen35_summary,
  });
  t.push_back({
      .name = "qwen3next",
      .default_vocab = "ggml-vocab-qwen2.gguf",
      .layout = "Gated DeltaNet + gated attention (3:1), MoE with a shared expert",
      // ssm_in is the legacy fused projection; current checkpoints carry attn_qkv/attn_gate.
      .drop = {"ssm_in.weight"},
      .hparams = write_qwen3next,
      .summary = qwen3next_summary,
  });
  t.push_back({
      .name = "kimi-linear",
      // Kimi's own tokenizer (tiktoken, pre "kimi-k2") has no vocabulary-only GGUF in
      // llama.cpp; Qwen2's byte-level BPE (with its ChatML template) stands in.
      .default_vocab = "ggml-vocab-qwen2.gguf",
      .layout = "Kimi Delta Attention + MLA (3:1), MoE with a shared expert",
      .tie_embeddings = false, // its loader requires output.weight
      .hparams = write_kimi,
      .summary = kimi_summary,
  });
  t.push_back({
      .name = "qwen2",
      .default_vocab = "ggml-vocab-qwen2.gguf",
      .layout = "transformer (GQA, QKV biases)",
      .keep = {"attn_q.bias", "attn_k.bias", "attn_v.bias"},
      .hparams = write_qwen2,
      .summary = qwen2_summary,
  });
  t.push_back({
      .name = "llama",
      .default_vocab = "ggml-vocab-llama-bpe.gguf",
      .layout = "transformer (GQA)",
      .hparams = write_llama,
      .summary = llama_summary,
  });
  t.push_back({
      .name = "nemotron_h",
      // Nemotron-H's tokenizer is a 131k tiktoken-style BPE; Llama 3's is the closest.
      .default_vocab = "ggml-vocab-llama-bpe.gguf",
      .layout = "Mamba-2 + attention + relu^2 MLP layers",
      .hparams = write_nemotron,
      .summary = nemotron_summary,
  });
  t.push_back({
      .name = "granitehybrid",
      // Granite 4.0's own BPE has no vocabulary-only GGUF; Llama 3's stands in.
      .default_vocab = "ggml-vocab-llama-bpe.gguf",
      .layout = "Mamba-2 + attention (5:1), dense FFN",
      .hparams = write_granite,
      .summary = granite_summary,
  });
  t.push_back({
      .name = "lfm2",
      // LFM2's own BPE has no vocabulary-only GGUF; Qwen2's (ChatML, as LFM2) stands in.
      .default_vocab = "ggml-vocab-qwen2.gguf",
      .layout = "gated short convolutions + attention, dense FFN",
      .drop = {"dense_2.weight", "dense_2.bias"}, // LFM2-ColBert's projection head
      .hparams = write_lfm2,
      .summary = lfm2_summary,
  });
  t.push_back({
      .name = "mamba2",
      // Mamba-2's own GPT-NeoX-20B BPE, as MPT uses it (the gpt-neox file lacks
      // tokenizer.ggml.pre, which makes llama.cpp warn on every load).
      .default_vocab = "ggml-vocab-mpt.gguf",
      .layout = "Mamba-2 SSM only",
      .hparams = write_mamba2,
      .summary = mamba2_summary,
  });
  return t;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool contains(const auto& list, std::string_view name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

} // namespace

const std::vector<arch_info>& arch_table() {
  static const std::vector<arch_info> table = make_table();
  return table;
}

const arch_info* find_arch(std::string_view name) {
  for (const auto& a : arch_table())
    if (a.name == name)
      return &a;
  return nullptr;
}

std::string_view tensor_base_name(std::string_view tensor) {
  constexpr std::string_view prefix = "blk.";
  if (tensor.substr(0, prefix.size()) != prefix)
    return tensor;
  const auto dot = tensor.find('.', prefix.size());
  return dot == std::string_view::npos ? tensor : tensor.substr(dot + 1);
}

bool drops_tensor(const arch_info& arch, std::string_view tensor) {
  const std::string_view base = tensor_base_name(tensor);
  if (ends_with(base, ".scale") || ends_with(base, ".input_scale"))
    return true;
  if (arch.tie_embeddings && tensor == "output.weight")
    return true;
  if (contains(arch.drop, base))
    return true;
  return contains(common_drop, base) && !contains(arch.keep, base);
}

uint32_t default_context_length(model_size size) {
  return size == model_size::tiny ? 8192 : 32768;
}

} // namespace prfaas::gguf_tool
