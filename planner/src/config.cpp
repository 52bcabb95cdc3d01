#include "prfaas/planner/config.hpp"

#include "prfaas/planner/trace_lengths.hpp"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace prfaas::planner {

namespace {

/// A YAML mapping with its dotted path, for errors that name the key.
class node {
public:
  node(const YAML::Node& n, std::string path, const std::string& source)
      : n_(n), path_(std::move(path)), source_(source) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw config_error(source_ + ": '" + join(key) + "' " + what);
  }
  std::string join(const std::string& key) const {
    return path_.empty() ? key : key.empty() ? path_ : path_ + "." + key;
  }
  bool has(const std::string& key) const { return n_[key].IsDefined() && !n_[key].IsNull(); }

  /// Rejects keys outside `allowed`; call once per mapping.
  void only(std::initializer_list<const char*> allowed) const {
    const std::set<std::string> ok(allowed.begin(), allowed.end());
    for (const auto& kv : n_) {
      const auto key = kv.first.as<std::string>();
      if (!ok.count(key))
        fail(key, "is not a known key here");
    }
  }
  node map(const std::string& key) const {
    const YAML::Node v = n_[key];
    if (!v.IsDefined() || v.IsNull())
      fail(key, "is missing");
    if (!v.IsMap())
      fail(key, "must be a mapping");
    return node(v, join(key), source_);
  }
  template <class T> T get(const std::string& key) const {
    const YAML::Node v = n_[key];
    if (!v.IsDefined() || v.IsNull())
      fail(key, "is missing");
    if (!v.IsScalar())
      fail(key, "must be a scalar");
    try {
      return v.as<T>();
    } catch (const YAML::Exception&) {
      fail(key, "has the wrong type ('" + v.Scalar() + "')");
    }
  }
  template <class T> T get_or(const std::string& key, T fallback) const {
    return has(key) ? get<T>(key) : fallback;
  }
  double positive(const std::string& key) const {
    const auto v = get<double>(key);
    if (!(v > 0))
      fail(key, "must be > 0");
    return v;
  }
  uint32_t count(const std::string& key, uint32_t min) const {
    const auto v = get<int64_t>(key);
    if (v < min || v > 1'000'000)
      fail(key, "must be an integer >= " + std::to_string(min));
    return static_cast<uint32_t>(v);
  }
  const YAML::Node& raw() const { return n_; }

private:
  YAML::Node n_;
  std::string path_;
  const std::string& source_;
};

std::string resolve(const std::filesystem::path& base, const std::string& p) {
  const std::filesystem::path path(p);
  return (path.is_absolute() ? path : base / path).lexically_normal().string();
}

engine::profile profile_at(const node& c, const std::filesystem::path& base) {
  const auto file = resolve(base, c.get<std::string>("profile"));
  auto prof = engine::load_profile(file);
  if (!prof)
    c.fail("profile", "cannot be loaded: " + prof.message());
  if (!prof->has_timing())
    c.fail("profile", "is phi-only (" + file + "); the planner needs prefill_points");
  return std::move(prof).value();
}

length_distribution lengths_from(const node& l, const std::filesystem::path& base) {
  const auto kind = l.get<std::string>("kind");
  if (kind == "lognormal") {
    l.only({"kind", "mu", "sigma", "min_tokens", "max_tokens", "bins"});
    lognormal_params p;
    p.mu = l.get<double>("mu");
    p.sigma = l.positive("sigma");
    p.min_tokens = l.positive("min_tokens");
    p.max_tokens = l.positive("max_tokens");
    if (p.min_tokens < 1)
      l.fail("min_tokens", "must be >= 1");
    if (p.max_tokens <= p.min_tokens)
      l.fail("max_tokens", "must exceed min_tokens");
    p.bins = l.has("bins") ? l.count("bins", 16) : p.bins;
    try {
      return length_distribution::lognormal(p);
    } catch (const std::invalid_argument& e) {
      l.fail("", e.what());
    }
  }
  if (kind == "trace") {
    l.only({"kind", "path", "block_tokens", "prefix_cache"});
    const auto file = resolve(base, l.get<std::string>("path"));
    const uint32_t block = l.has("block_tokens") ? l.count("block_tokens", 1) : 512;
    const auto cache = l.get_or<std::string>("prefix_cache", "infinite");
    if (cache != "infinite" && cache != "none")
      l.fail("prefix_cache", "must be 'infinite' or 'none'");
    try {
      auto t = load_trace_lengths(file, block, cache == "infinite");
      return length_distribution::empirical(std::move(t.uncached));
    } catch (const std::runtime_error& e) {
      l.fail("path", std::string("cannot be used: ") + e.what());
    }
  }
  if (kind == "list") {
    l.only({"kind", "tokens"});
    const YAML::Node v = l.raw()["tokens"];
    if (!v.IsDefined() || !v.IsSequence() || v.size() == 0)
      l.fail("tokens", "must be a non-empty list of lengths");
    std::vector<uint64_t> out;
    for (size_t i = 0; i < v.size(); ++i) {
      int64_t x = 0;
      try {
        x = v[i].as<int64_t>();
      } catch (const YAML::Exception&) {
        x = 0;
      }
      if (x < 1)
        l.fail("tokens[" + std::to_string(i) + "]", "must be an integer >= 1");
      out.push_back(static_cast<uint64_t>(x));
    }
    return length_distribution::empirical(std::move(out));
  }
  l.fail("kind", "must be 'lognormal', 'trace' or 'list' (got '" + kind + "')");
}

reference_figures reference_from(const node& r, std::string& source) {
  reference_figures out;
  source = r.get_or<std::string>("source", "");
  for (const auto& kv : r.raw()) {
    const auto plan = kv.first.as<std::string>();
    if (plan == "source")
      continue;
    if (plan != "prfaas_pd" && plan != "homogeneous_pd" && plan != "naive_heterogeneous")
      r.fail(plan, "is not a plan (prfaas_pd, homogeneous_pd, naive_heterogeneous)");
    const node p = r.map(plan);
    p.only({"threshold_tokens", "n_prfaas", "n_p", "n_d", "theta_prfaas", "theta_pd_p",
            "theta_pd_d", "lambda_max", "ttft_mean_s", "ttft_p90_s", "egress_gbps", "p",
            "l_long_tokens"});
    for (const auto& f : p.raw())
      out[plan][f.first.as<std::string>()] = p.get<double>(f.first.as<std::string>());
  }
  return out;
}

/// workload, model and search: the keys both config shapes share.
void workload_from(const node& top, const std::filesystem::path& base, workload_inputs& in) {
  const node work = top.map("workload");
  work.only({"input_lengths", "output_tokens", "decode_slo_tokens_per_s"});
  in.lengths = lengths_from(work.map("input_lengths"), base);
  in.output_tokens = work.count("output_tokens", 1);
  in.slo_tokens_per_s = work.positive("decode_slo_tokens_per_s");
  if (top.has("model")) {
    const node model = top.map("model");
    model.only({"prefill_time"});
    const auto form = model.get_or<std::string>("prefill_time", "mean_length");
    if (form == "mean_length")
      in.form = prefill_time_form::mean_length;
    else if (form == "expected_time")
      in.form = prefill_time_form::expected_time;
    else
      model.fail("prefill_time", "must be 'mean_length' or 'expected_time'");
  }
  if (top.has("search")) {
    const node s = top.map("search");
    s.only({"threshold_points", "refine_rounds"});
    in.threshold_points = s.has("threshold_points") ? s.count("threshold_points", 8) : 256;
    in.refine_rounds = s.has("refine_rounds") ? s.count("refine_rounds", 0) : 3;
  }
}

YAML::Node load_root(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw config_error(source + ": YAML error: " + e.what());
  }
  if (!root.IsMap())
    throw config_error(source + ": the top level must be a mapping");
  return root;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f)
    throw config_error(path + ": cannot open file");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

} // namespace

planner_config parse_config(const std::string& text, const std::string& source,
                            const std::filesystem::path& base_dir) {
  const YAML::Node root = load_root(text, source);
  const node top(root, "", source);
  top.only({"name", "clusters", "baselines", "link", "workload", "model", "search", "reference"});

  planner_config cfg;
  cfg.path = source;
  case_inputs& in = cfg.inputs;
  in.name = top.get_or<std::string>("name", "");

  const node clusters = top.map("clusters");
  clusters.only({"prfaas", "pd"});
  const node prfaas = clusters.map("prfaas"), pd = clusters.map("pd");
  prfaas.only({"profile", "instances"});
  pd.only({"profile", "instances"});
  in.prfaas = {profile_at(prfaas, base_dir), prfaas.count("instances", 1)};
  in.pd = {profile_at(pd, base_dir), pd.count("instances", 2)};
  if (!in.pd.profile.decode)
    pd.fail("profile", "has no 'decode' model (PD-D throughput needs one)");

  const node base = top.map("baselines");
  base.only({"homogeneous_instances"});
  in.homogeneous_instances = base.count("homogeneous_instances", 2);

  const node link = top.map("link");
  link.only({"bandwidth_gbps"});
  in.link_gbps = link.positive("bandwidth_gbps");

  workload_from(top, base_dir, in);
  if (top.has("reference"))
    cfg.reference = reference_from(top.map("reference"), cfg.reference_source);
  return cfg;
}

planner_config load_config(const std::string& path) {
  return parse_config(read_file(path), path, std::filesystem::path(path).parent_path());
}

namespace {

/// A list of mappings under `key`, each a node named `key[i]`.
std::vector<node> list_of(const node& top, const std::string& key, const std::string& source) {
  const YAML::Node v = top.raw()[key];
  if (!v.IsDefined() || !v.IsSequence() || v.size() == 0)
    top.fail(key, "must be a non-empty list");
  std::vector<node> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = key + "[" + std::to_string(i) + "]";
    if (!v[i].IsMap())
      top.fail(at, "must be a mapping");
    out.emplace_back(v[i], at, source);
  }
  return out;
}

} // namespace

multi_config parse_multi_config(const std::string& text, const std::string& source,
                                const std::filesystem::path& base_dir) {
  const YAML::Node root = load_root(text, source);
  const node top(root, "", source);
  // No `search`: the M × N planner bisects on Λ (multi.hpp), it has no t grid to size.
  top.only({"name", "prfaas_clusters", "pd_clusters", "links", "link_split", "workload", "model"});
  multi_config cfg;
  cfg.path = source;
  auto& in = cfg.inputs;
  in.name = top.get_or<std::string>("name", "");
  std::map<std::string, size_t> prfaas, pd;
  for (auto& c : list_of(top, "prfaas_clusters", source)) {
    c.only({"name", "profile", "instances"});
    const auto name = c.get<std::string>("name");
    if (!prfaas.emplace(name, in.prfaas.size()).second)
      c.fail("name", "repeats '" + name + "'");
    in.prfaas.push_back({name, {profile_at(c, base_dir), c.count("instances", 1)}});
  }
  for (auto& c : list_of(top, "pd_clusters", source)) {
    c.only({"name", "profile", "instances", "share"});
    const auto name = c.get<std::string>("name");
    if (prfaas.count(name) || !pd.emplace(name, in.pd.size()).second)
      c.fail("name", "repeats '" + name + "'");
    multi_inputs::pd_cluster x{name, {profile_at(c, base_dir), c.count("instances", 2)}, 0};
    if (!x.spec.profile.decode)
      c.fail("profile", "has no 'decode' model (PD-D throughput needs one)");
    x.share = c.has("share") ? c.positive("share") : 0;
    in.pd.push_back(std::move(x));
  }
  size_t shared = 0;
  for (auto& c : in.pd)
    shared += c.share > 0 ? 1 : 0;
  if (shared != 0 && shared != in.pd.size())
    top.fail("pd_clusters", "give every cluster a 'share' or none (then: by instances)");
  for (auto& l : list_of(top, "links", source)) {
    l.only({"between", "bandwidth_gbps"});
    const YAML::Node b = l.raw()["between"];
    if (!b.IsSequence() || b.size() != 2 || !b[0].IsScalar() || !b[1].IsScalar())
      l.fail("between", "must be [PRFAAS_CLUSTER, PD_CLUSTER]");
    const auto a = b[0].as<std::string>(), d = b[1].as<std::string>();
    if (!prfaas.count(a))
      l.fail("between", "names '" + a + "', not a declared PrfaaS cluster");
    if (!pd.count(d))
      l.fail("between", "names '" + d + "', not a declared PD cluster");
    in.links.push_back({prfaas[a], pd[d], l.positive("bandwidth_gbps")});
  }
  if (top.has("link_split")) {
    const auto split = top.get<std::string>("link_split");
    if (split != "soonest" && split != "rate")
      top.fail("link_split", "must be soonest or rate, not '" + split + "'");
    in.split_by_rate = split == "rate";
  }
  workload_from(top, base_dir, in);
  return cfg;
}

multi_config load_multi_config(const std::string& path) {
  return parse_multi_config(read_file(path), path, std::filesystem::path(path).parent_path());
}

bool is_multi_config(const std::string& path) {
  try {
    const auto root = YAML::Load(read_file(path));
    return root.IsMap() && root["prfaas_clusters"].IsDefined();
  } catch (const YAML::Exception&) {
    return false; // load_config reports the YAML error
  }
}

} // namespace prfaas::planner
