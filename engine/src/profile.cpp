#include "prfaas/engine/profile.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace prfaas::engine {

namespace {

constexpr double mib = 1024.0 * 1024.0;

struct reader {
  const std::string& source;
  std::string err;

  template <class T>
  bool get(const YAML::Node& n, const std::string& key, const std::string& path, T& out,
           bool required = true) {
    const YAML::Node v = n[key];
    if (!v) {
      if (required && err.empty())
        err = "profile " + source + ": missing key '" + path + key + "'";
      return false;
    }
    try {
      out = v.as<T>();
      return true;
    } catch (const YAML::Exception&) {
      if (err.empty())
        err = "profile " + source + ": key '" + path + key + "' has the wrong type";
      return false;
    }
  }
  bool fail(const std::string& what) {
    if (err.empty())
      err = "profile " + source + ": " + what;
    return false;
  }
};

} // namespace

double interpolate(const std::vector<std::pair<double, double>>& xy, double x) {
  for (const auto& [kx, ky] : xy)
    if (kx == x)
      return ky;
  size_t i = 1;
  while (i + 1 < xy.size() && x > xy[i].first)
    ++i;
  const auto [x0, y0] = xy[i - 1];
  const auto [x1, y1] = xy[i];
  return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
}

std::vector<std::pair<double, double>> profile::kv_knots() const {
  std::vector<std::pair<double, double>> xy;
  for (const auto& p : points)
    if (p.has_kv)
      xy.emplace_back(static_cast<double>(p.tokens), p.kv_mib * mib);
  return xy;
}

double profile::kv_bytes(uint64_t tokens) const {
  return std::max(0.0, interpolate(kv_knots(), static_cast<double>(tokens)));
}

double profile::prefill_seconds(uint64_t tokens) const {
  const double l = static_cast<double>(tokens);
  const auto& first = points.front();
  const auto& last = points.back();
  if (l > static_cast<double>(last.tokens)) {
    // T = a·l + b·l² through the last two points.
    const auto& prev = points[points.size() - 2];
    const double l1 = static_cast<double>(prev.tokens), l2 = static_cast<double>(last.tokens);
    const double r1 = prev.prefill_s / l1, r2 = last.prefill_s / l2; // r = a + b·l
    const double b = (r2 - r1) / (l2 - l1);
    if (b > 0)
      return (r1 - b * l1) * l + b * l * l;
    return last.prefill_s + (last.prefill_s - prev.prefill_s) / (l2 - l1) * (l - l2);
  }
  std::vector<std::pair<double, double>> xy;
  for (const auto& p : points)
    xy.emplace_back(static_cast<double>(p.tokens), p.prefill_s);
  double t = interpolate(xy, l);
  if (l < static_cast<double>(first.tokens))
    t = std::max(t, first.prefill_s * l / static_cast<double>(first.tokens));
  return std::max(t, 1e-3);
}

double profile::decode_seconds(uint32_t batch, uint64_t context) const {
  if (!decode)
    return 0.0;
  return decode->step_base_s +
         batch * (decode->per_seq_s + decode->per_ctx_token_s * static_cast<double>(context));
}

uint32_t profile::max_batch(uint64_t context) const {
  if (!decode || decode->slo_tokens_per_s <= 0)
    return 0;
  const double budget = 1.0 / decode->slo_tokens_per_s - decode->step_base_s;
  const double per = decode->per_seq_s + decode->per_ctx_token_s * static_cast<double>(context);
  if (budget <= 0 || per <= 0)
    return 0;
  return static_cast<uint32_t>(std::floor(budget / per + 1e-9));
}

double profile::phi_gbps(uint64_t tokens) const {
  if (has_timing())
    return kv_bytes(tokens) * 8.0 / prefill_seconds(tokens) / 1e9;
  const double l = static_cast<double>(tokens);
  if (l <= static_cast<double>(phi.front().tokens))
    return phi.front().phi_gbps;
  if (l >= static_cast<double>(phi.back().tokens))
    return phi.back().phi_gbps;
  std::vector<std::pair<double, double>> xy;
  for (const auto& p : phi)
    xy.emplace_back(static_cast<double>(p.tokens), p.phi_gbps);
  return interpolate(xy, l);
}

namespace {

/// `prefill_points`: increasing tokens and times, kv_mib non-decreasing where given
/// (on at least 2 points).
void read_points(reader& r, const YAML::Node& pts, profile& p) {
  double last_kv = 0;
  size_t kv_points = 0;
  for (size_t i = 0; r.err.empty() && i < pts.size(); ++i) {
    const std::string path = "prefill_points[" + std::to_string(i) + "].";
    profile_point pt;
    r.get(pts[i], "tokens", path, pt.tokens);
    pt.has_kv = r.get(pts[i], "kv_mib", path, pt.kv_mib, false);
    r.get(pts[i], "prefill_s", path, pt.prefill_s);
    double phi = 0;
    if (r.get(pts[i], "phi_gbps", path, phi, false))
      pt.phi_gbps = phi;
    if (!r.err.empty())
      break;
    if (pt.tokens == 0 || (pt.has_kv && !(pt.kv_mib > 0)) || !(pt.prefill_s > 0))
      r.fail("'" + path + "' needs tokens and prefill_s > 0 (and kv_mib > 0 if given)");
    else if (!p.points.empty() &&
             (pt.tokens <= p.points.back().tokens || pt.prefill_s < p.points.back().prefill_s))
      r.fail("'" + path + "' must increase over the previous point (monotone profile)");
    else if (pt.has_kv && last_kv > pt.kv_mib)
      r.fail("'" + path + "kv_mib' must not decrease (monotone profile)");
    if (pt.has_kv)
      last_kv = pt.kv_mib, ++kv_points;
    p.points.push_back(pt);
  }
  if (r.err.empty() && kv_points < 2)
    r.fail("'prefill_points' needs kv_mib on at least 2 points");
}

/// `decode`: the decode step model.
decode_model read_decode(reader& r, const YAML::Node& d) {
  decode_model m;
  r.get(d, "slo_tokens_per_s", "decode.", m.slo_tokens_per_s);
  r.get(d, "step_base_s", "decode.", m.step_base_s);
  r.get(d, "per_seq_s", "decode.", m.per_seq_s);
  r.get(d, "per_ctx_token_s", "decode.", m.per_ctx_token_s);
  if (r.err.empty() &&
      (m.slo_tokens_per_s <= 0 || m.step_base_s < 0 || m.per_seq_s < 0 || m.per_ctx_token_s < 0))
    r.fail("'decode' values must be non-negative and slo_tokens_per_s > 0");
  return m;
}

/// `phi_points` (a phi-only profile): increasing tokens, phi_gbps > 0.
void read_phi_points(reader& r, const YAML::Node& phis, profile& p) {
  for (size_t i = 0; r.err.empty() && i < phis.size(); ++i) {
    const std::string path = "phi_points[" + std::to_string(i) + "].";
    phi_point pt;
    r.get(phis[i], "tokens", path, pt.tokens);
    r.get(phis[i], "phi_gbps", path, pt.phi_gbps);
    if (r.err.empty() && (pt.tokens == 0 || !(pt.phi_gbps > 0) ||
                          (!p.phi.empty() && pt.tokens <= p.phi.back().tokens)))
      r.fail("'" + path + "' needs increasing tokens and phi_gbps > 0");
    p.phi.push_back(pt);
  }
}

} // namespace

result<profile> parse_profile(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return make_error("profile " + source + ": YAML error: " + e.what());
  }
  if (!root.IsMap())
    return make_error("profile " + source + ": top level must be a mapping");
  reader r{source, {}};
  profile p;
  p.source = source;
  r.get(root, "name", "", p.name);
  r.get(root, "model", "", p.model);
  r.get(root, "hardware", "", p.hardware);
  r.get(root, "gpus", "", p.gpus);
  const YAML::Node pts = root["prefill_points"];
  const YAML::Node phis = root["phi_points"];
  if (pts && phis)
    r.fail("give either prefill_points or phi_points, not both");
  if (!pts && !phis)
    r.fail("missing key 'prefill_points' (or 'phi_points' for a phi-only profile)");
  if (pts) {
    r.get(root, "layers", "", p.layers);
    r.get(root, "linear_per_full", "", p.linear_per_full);
    if (r.err.empty() && (p.layers == 0 || p.layers % (p.linear_per_full + 1) != 0))
      r.fail("'layers' must be a positive multiple of linear_per_full + 1");
    if (!pts.IsSequence() || pts.size() < 2)
      r.fail("'prefill_points' must be a list of at least 2 points");
    read_points(r, pts, p);
    if (const YAML::Node d = root["decode"]; d && r.err.empty())
      p.decode = read_decode(r, d);
  } else {
    if (!phis.IsSequence() || phis.size() < 1)
      r.fail("'phi_points' must be a non-empty list");
    read_phi_points(r, phis, p);
  }
  if (!r.err.empty())
    return make_error(r.err);
  return p;
}

result<profile> load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return make_error("profile " + path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_profile(ss.str(), path);
}

} // namespace prfaas::engine
