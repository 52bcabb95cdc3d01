#include "reference_model.hpp"

#include "prfaas/engine/rng.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

// Hot loops: compiled with -O3 in every build type (see engine/CMakeLists.txt). No
// fast-math: results depend only on the source's operation order, which is fixed.
namespace prfaas::engine {

namespace {

/// Four float lanes (GCC/Clang vector extension; SSE on x86-64, NEON on arm64).
/// Lane-wise arithmetic is exactly the scalar arithmetic of each lane.
using v4 = float __attribute__((vector_size(16)));

inline v4 load4(const float* p) {
  v4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, v4 v) {
  std::memcpy(p, &v, sizeof v);
}

/// y = x·W with W stored [in][out]: y[o] = Σ_i x[i]·W[i][o], summed in i order
/// starting from 0 (16/4 output columns at a time in registers; same sums).
void matvec(const float* __restrict w, const float* __restrict x, float* __restrict y, uint32_t in,
            uint32_t out) {
  uint32_t o = 0;
  for (; o + 16 <= out; o += 16) {
    v4 a0{}, a1{}, a2{}, a3{};
    const float* r = w + o;
    for (uint32_t i = 0; i < in; ++i, r += out) {
      const v4 xi = {x[i], x[i], x[i], x[i]};
      a0 += xi * load4(r);
      a1 += xi * load4(r + 4);
      a2 += xi * load4(r + 8);
      a3 += xi * load4(r + 12);
    }
    store4(y + o, a0);
    store4(y + o + 4, a1);
    store4(y + o + 8, a2);
    store4(y + o + 12, a3);
  }
  for (; o + 4 <= out; o += 4) {
    v4 a{};
    const float* r = w + o;
    for (uint32_t i = 0; i < in; ++i, r += out)
      a += v4{x[i], x[i], x[i], x[i]} * load4(r);
    store4(y + o, a);
  }
  for (; o < out; ++o) {
    float a = 0.0f;
    for (uint32_t i = 0; i < in; ++i)
      a += x[i] * w[size_t{i} * out + o];
    y[o] = a;
  }
}

/// Dot product of n floats (n % 8 == 0) with 8 fixed lanes and a fixed final tree.
float dot8(const float* __restrict a, const float* __restrict b, uint32_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (uint32_t i = 0; i < n; i += 8)
    for (uint32_t l = 0; l < 8; ++l)
      acc[l] += a[i + l] * b[i + l];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void rmsnorm(const float* x, const float* gain, float* y, uint32_t n) {
  float ss = 0.0f;
  for (uint32_t i = 0; i < n; ++i)
    ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + 1e-6f);
  for (uint32_t i = 0; i < n; ++i)
    y[i] = x[i] * inv * gain[i];
}

void l2norm(float* x, uint32_t n) {
  float ss = 0.0f;
  for (uint32_t i = 0; i < n; ++i)
    ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss + 1e-6f);
  for (uint32_t i = 0; i < n; ++i)
    x[i] *= inv;
}

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

std::vector<float> random_matrix(xoshiro256& rng, size_t rows, size_t cols, float scale) {
  std::vector<float> m(rows * cols);
  for (auto& v : m)
    v = (2.0f * rng.uniform_float() - 1.0f) * scale;
  return m;
}

std::vector<float> gains(xoshiro256& rng, size_t n) {
  std::vector<float> g(n);
  for (auto& v : g)
    v = 1.0f + 0.1f * (2.0f * rng.uniform_float() - 1.0f);
  return g;
}

/// One head of causal attention over positions [0, n). D_ = head size if known at
/// compile time (0: use d_rt). Every instantiation performs the same operations in
/// the same order per output (score j: Σ_d in d order; output c: Σ_j in j order).
template <uint32_t D_>
void attend(const float* __restrict qh, const kv_cache& kv, uint32_t hh, uint32_t H, uint32_t n,
            float scale, float* __restrict s, float* __restrict oh, uint32_t d_rt) {
  const uint32_t D = D_ ? D_ : d_rt;
  constexpr uint32_t T = kv_cache::tile;
  static_assert(T == 16, "score kernel assumes 16-position tiles");
  const uint32_t tiles = (n + T - 1) / T;
  for (uint32_t t = 0; t < tiles; ++t) {
    v4 a0{}, a1{}, a2{}, a3{};
    const float* kt = kv.kt.data() + (size_t{t} * H + hh) * D * T;
    for (uint32_t dd = 0; dd < D; ++dd, kt += T) {
      const v4 q = {qh[dd], qh[dd], qh[dd], qh[dd]};
      a0 += q * load4(kt);
      a1 += q * load4(kt + 4);
      a2 += q * load4(kt + 8);
      a3 += q * load4(kt + 12);
    }
    const v4 sc = {scale, scale, scale, scale};
    store4(s + t * T, a0 * sc);
    store4(s + t * T + 4, a1 * sc);
    store4(s + t * T + 8, a2 * sc);
    store4(s + t * T + 12, a3 * sc);
  }
  float mx = -INFINITY;
  for (uint32_t j = 0; j < n; ++j)
    mx = std::max(mx, s[j]);
  float sum = 0.0f;
  for (uint32_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - mx);
    sum += s[j];
  }
  v4 acc[16] = {};
  const uint32_t quads = D / 4;
  for (uint32_t j = 0; j < n; ++j) {
    const v4 p = {s[j], s[j], s[j], s[j]};
    const float* vj = kv.v.data() + (size_t{j} * H + hh) * D;
    for (uint32_t c = 0; c < quads; ++c)
      acc[c] += p * load4(vj + 4 * c);
  }
  const float inv = 1.0f / sum;
  const v4 iv = {inv, inv, inv, inv};
  for (uint32_t c = 0; c < quads; ++c)
    store4(oh + 4 * c, acc[c] * iv);
}

} // namespace

reference_model::reference_model(const reference_config& config) : c_(config) {
  for (char ch : c_.layer_pattern)
    kinds_.push_back(ch == 'F' ? layer_kind::full : layer_kind::linear);
  xoshiro256 rng(mix64(c_.weight_seed ^ 0x7265662d6d6f646cULL));
  const uint32_t d = c_.d_model, hd = c_.n_heads * c_.head_dim, H = c_.n_heads;
  const float sd = 1.0f / std::sqrt(static_cast<float>(d));
  const float shd = 1.0f / std::sqrt(static_cast<float>(hd));
  const float sh = 1.0f / std::sqrt(static_cast<float>(c_.mlp_hidden));
  embed_ = random_matrix(rng, vocab(), d, 1.0f);
  for (uint32_t l = 0; l < n_layers(); ++l) {
    layer_weights w;
    w.norm1 = gains(rng, d);
    w.wq = random_matrix(rng, d, hd, sd);
    w.wk = random_matrix(rng, d, hd, sd);
    w.wv = random_matrix(rng, d, hd, sd);
    w.wo = random_matrix(rng, hd, d, 0.5f * shd);
    if (kinds_[l] == layer_kind::linear) {
      w.wa = random_matrix(rng, d, H, 0.5f * sd);
      w.ba = std::vector<float>(H, 3.0f); // decay α ≈ sigmoid(3) ≈ 0.95: long memory
      w.wb = random_matrix(rng, d, H, 0.5f * sd);
      w.bb = std::vector<float>(H, 0.0f);
    }
    w.norm2 = gains(rng, d);
    w.w1 = random_matrix(rng, d, c_.mlp_hidden, sd);
    w.w2 = random_matrix(rng, c_.mlp_hidden, d, 0.5f * sh);
    layers_.push_back(std::move(w));
  }
  final_norm_ = gains(rng, d);
  unembed_ = random_matrix(rng, d, vocab(), 2.0f * sd);
}

double reference_model::macs_per_token(uint64_t pos) const {
  const double d = c_.d_model, hd = c_.n_heads * c_.head_dim;
  double macs = 0;
  for (auto k : kinds_) {
    macs += 4 * d * hd + 2 * d * c_.mlp_hidden;
    macs +=
        k == layer_kind::full ? 2.0 * hd * static_cast<double>(pos + 1) : 3.0 * hd * c_.head_dim;
  }
  return macs;
}

model_tensors reference_model::empty_tensors() const {
  model_tensors t;
  t.kv.resize(n_layers());
  t.state.resize(n_layers());
  for (uint32_t l = 0; l < n_layers(); ++l)
    if (kinds_[l] == layer_kind::linear)
      t.state[l].assign(state_floats(), 0.0f);
  return t;
}

// Gated delta rule, per head with normalised k and q:
//   S_t = α_t · S_{t-1} (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ,   o_t = S_t q_t
// computed as u = S k;  S ← α S + (β v − α β u) kᵀ.
void reference_model::linear_layer(const layer_weights& w, std::vector<float>& S, const float* h,
                                   float* o) const {
  const uint32_t d = c_.d_model, H = c_.n_heads, D = c_.head_dim, hd = H * D;
  float q[512], k[512], v[512], a[64], b[64], u[64];
  matvec(w.wq.data(), h, q, d, hd);
  matvec(w.wk.data(), h, k, d, hd);
  matvec(w.wv.data(), h, v, d, hd);
  matvec(w.wa.data(), h, a, d, H);
  matvec(w.wb.data(), h, b, d, H);
  for (uint32_t hh = 0; hh < H; ++hh) {
    float* qh = q + hh * D;
    float* kh = k + hh * D;
    const float* vh = v + hh * D;
    l2norm(qh, D);
    l2norm(kh, D);
    const float alpha = sigmoid(a[hh] + w.ba[hh]);
    const float beta = sigmoid(b[hh] + w.bb[hh]);
    float* Sh = S.data() + size_t{hh} * D * D;
    for (uint32_t r = 0; r < D; ++r)
      u[r] = dot8(Sh + size_t{r} * D, kh, D);
    for (uint32_t r = 0; r < D; ++r) {
      const float coef = beta * vh[r] - alpha * beta * u[r];
      float* __restrict row = Sh + size_t{r} * D;
      for (uint32_t c = 0; c < D; ++c)
        row[c] = alpha * row[c] + coef * kh[c];
    }
    for (uint32_t r = 0; r < D; ++r)
      o[hh * D + r] = dot8(Sh + size_t{r} * D, qh, D);
  }
}

void reference_model::grow(kv_cache& c, uint32_t length) const {
  const uint32_t H = c_.n_heads, D = c_.head_dim, T = kv_cache::tile;
  const size_t tiles = (size_t{length} + T - 1) / T;
  if (c.kt.size() < tiles * H * D * T)
    c.kt.resize(tiles * H * D * T, 0.0f);
  if (c.v.size() < size_t{length} * H * D)
    c.v.resize(size_t{length} * H * D, 0.0f);
  c.length = std::max(c.length, length);
}

void reference_model::read_kv(const kv_cache& c, uint32_t begin, uint32_t end, float* out) const {
  const uint32_t H = c_.n_heads, D = c_.head_dim, T = kv_cache::tile, hd = H * D;
  for (uint32_t p = begin; p < end; ++p, out += 2 * hd) {
    const float* tile = c.kt.data() + size_t{p / T} * hd * T;
    for (uint32_t i = 0; i < hd; ++i)
      out[i] = tile[size_t{i} * T + p % T];
    std::copy_n(c.v.data() + size_t{p} * hd, hd, out + hd);
  }
}

void reference_model::write_kv(kv_cache& c, uint32_t begin, uint32_t end, const float* rows) const {
  const uint32_t H = c_.n_heads, D = c_.head_dim, T = kv_cache::tile, hd = H * D;
  grow(c, end);
  for (uint32_t p = begin; p < end; ++p, rows += 2 * hd) {
    float* tile = c.kt.data() + size_t{p / T} * hd * T;
    for (uint32_t i = 0; i < hd; ++i)
      tile[size_t{i} * T + p % T] = rows[i];
    std::copy_n(rows + hd, hd, c.v.data() + size_t{p} * hd);
  }
}

// Causal softmax attention over cached positions 0..pos (this token's K/V written first).
// score[j] = Σ_d q[d]·k_j[d] accumulated in d order for every j (lanes = positions).
void reference_model::full_layer(const layer_weights& w, kv_cache& kv, uint32_t pos, const float* h,
                                 float* o, std::vector<float>& scratch) const {
  const uint32_t d = c_.d_model, H = c_.n_heads, D = c_.head_dim, hd = H * D;
  constexpr uint32_t T = kv_cache::tile;
  float q[512], row[1024];
  matvec(w.wq.data(), h, q, d, hd);
  matvec(w.wk.data(), h, row, d, hd);
  matvec(w.wv.data(), h, row + hd, d, hd);
  write_kv(kv, pos, pos + 1, row);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const uint32_t n = pos + 1;
  scratch.resize((size_t{n} + T - 1) / T * T);
  for (uint32_t hh = 0; hh < H; ++hh) {
    switch (D) { // compile-time head sizes keep the accumulators in registers
    case 16:
      attend<16>(q + hh * D, kv, hh, H, n, scale, scratch.data(), o + hh * D, D);
      break;
    case 32:
      attend<32>(q + hh * D, kv, hh, H, n, scale, scratch.data(), o + hh * D, D);
      break;
    case 64:
      attend<64>(q + hh * D, kv, hh, H, n, scale, scratch.data(), o + hh * D, D);
      break;
    default:
      attend<0>(q + hh * D, kv, hh, H, n, scale, scratch.data(), o + hh * D, D);
      break;
    }
  }
}

void reference_model::mlp(const layer_weights& w, float* x, std::vector<float>& scratch) const {
  const uint32_t d = c_.d_model, m = c_.mlp_hidden;
  scratch.resize(size_t{d} * 2 + m);
  float* h = scratch.data();
  float* a = h + d;
  float* y = a + m;
  rmsnorm(x, w.norm2.data(), h, d);
  matvec(w.w1.data(), h, a, d, m);
  for (uint32_t i = 0; i < m; ++i)
    a[i] = a[i] / (1.0f + std::exp(-a[i])); // SiLU
  matvec(w.w2.data(), a, y, m, d);
  for (uint32_t i = 0; i < d; ++i)
    x[i] += y[i];
}

void reference_model::forward(model_tensors& t, uint32_t base, std::span<const token> input,
                              std::span<float> logits, uint32_t checkpoint_interval,
                              const checkpoint_fn& on_checkpoint,
                              const layer_done_fn& on_layer) const {
  const uint32_t d = c_.d_model, hd = c_.n_heads * c_.head_dim;
  const size_t m = input.size();
  std::vector<float> x(m * d), h(d), o(hd), y(d), att_scratch, mlp_scratch;
  for (size_t i = 0; i < m; ++i)
    std::copy_n(embed_.data() + size_t(input[i]) * d, d, x.data() + i * d);
  for (uint32_t l = 0; l < n_layers(); ++l) {
    const layer_weights& w = layers_[l];
    for (size_t i = 0; i < m; ++i) {
      float* xi = x.data() + i * d;
      const auto pos = static_cast<uint32_t>(base + i);
      rmsnorm(xi, w.norm1.data(), h.data(), d);
      if (kinds_[l] == layer_kind::linear) {
        linear_layer(w, t.state[l], h.data(), o.data());
        if (checkpoint_interval != 0 && (pos + 1) % checkpoint_interval == 0 && on_checkpoint)
          on_checkpoint(l, pos + 1, t.state[l]);
      } else {
        full_layer(w, t.kv[l], pos, h.data(), o.data(), att_scratch);
      }
      matvec(w.wo.data(), o.data(), y.data(), hd, d);
      for (uint32_t c = 0; c < d; ++c)
        xi[c] += y[c];
      mlp(w, xi, mlp_scratch);
    }
    if (on_layer)
      on_layer(l);
  }
  rmsnorm(x.data() + (m - 1) * d, final_norm_.data(), h.data(), d);
  matvec(unembed_.data(), h.data(), logits.data(), d, vocab());
}

} // namespace prfaas::engine
