#include "common/engine_setup.hpp"

#include <filesystem>
#include <map>
#include <mutex>
#include <tuple>

#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/engine/llama_engine.hpp"
#include "prfaas/engine/profile_engine.hpp"
#include "prfaas/engine/reference_engine.hpp"

namespace fs = std::filesystem;

namespace prfaas::serving {

namespace {

std::string resolve_path(const deployment_config& dep, const std::string& path) {
  fs::path p{path};
  if (p.is_absolute())
    return path;
  // Relative to the deployment file first (a config next to its profiles), then to
  // the working directory (the embedded default config, run from the repository).
  if (!dep.source.empty() && dep.source.front() != '<') {
    auto beside = fs::path{dep.source}.parent_path() / p;
    std::error_code ec;
    if (fs::exists(beside, ec))
      return beside.string();
  }
  return path;
}

template <class T> T scalar(const YAML::Node& n, const std::string& key, const char* what) {
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    throw config_error(key, std::string{"expected "} + what + ", got \"" +
                                (n.IsScalar() ? n.Scalar() : std::string{"a collection"}) + "\"");
  }
}

void check_keys(const YAML::Node& n, const std::string& path,
                std::initializer_list<const char*> allowed) {
  for (auto it = n.begin(); it != n.end(); ++it) {
    auto key = it->first.as<std::string>();
    bool ok = false;
    for (auto* a : allowed)
      ok = ok || key == a;
    if (!ok) {
      std::string list;
      for (auto* a : allowed)
        list += (list.empty() ? "" : ", ") + std::string{a};
      throw config_error(path.empty() ? key : path + "." + key,
                         "unknown key (expected one of: " + list + ")");
    }
  }
}

/// `load(path)` once per file in this process, keyed by path, size and modification
/// time: a file rewritten in place is read again; a failed read is not kept (its error
/// says what is wrong). A simulation of 1,000 workers would otherwise read the same few
/// files 1,000 times at start.
template <class T, class Load> engine::result<T> read_once(const std::string& path, Load load) {
  using key = std::tuple<std::string, uintmax_t, fs::file_time_type>;
  static std::mutex mtx;
  static std::map<key, T> cache;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const auto mtime = ec ? fs::file_time_type{} : fs::last_write_time(path, ec);
  if (ec)
    return load(path);
  const key k{path, size, mtime};
  {
    std::lock_guard<std::mutex> guard{mtx};
    if (auto i = cache.find(k); i != cache.end())
      return i->second;
  }
  auto loaded = load(path);
  if (loaded) {
    std::lock_guard<std::mutex> guard{mtx};
    cache.emplace(k, loaded.value());
  }
  return loaded;
}

/// What a GGUF declares, read once per file.
engine::result<engine::gguf_facts> cached_facts(const std::string& path) {
  return read_once<engine::gguf_facts>(
      path, [](const std::string& p) { return engine::inspect_gguf(p); });
}

/// `model.llama` and, for engine: llama, the GGUF's own limits: the file must load, its
/// architecture be one prfaas serves, the context fit the model.
void read_llama(const deployment_config& dep, const YAML::Node& n, model_settings& m) {
  if (auto l = n["llama"]) {
    if (!l.IsMap())
      throw config_error("model.llama", "expected a mapping");
    check_keys(l, "model.llama", {"gguf", "context", "batch", "ubatch", "threads"});
    if (l["gguf"])
      m.gguf = resolve_path(dep, scalar<std::string>(l["gguf"], "model.llama.gguf", "a path"));
    for (auto [key, out] : {std::pair{"context", &m.context}, std::pair{"batch", &m.batch},
                            std::pair{"ubatch", &m.ubatch}, std::pair{"threads", &m.threads}})
      if (l[key])
        *out = scalar<uint32_t>(l[key], std::string{"model.llama."} + key, "an integer");
    for (auto [key, v] : {std::pair{"batch", m.batch}, std::pair{"ubatch", m.ubatch},
                          std::pair{"threads", m.threads}})
      if (v == 0)
        throw config_error(std::string{"model.llama."} + key, "must be at least 1");
    if (m.ubatch > m.batch)
      throw config_error("model.llama.ubatch",
                         "must not exceed model.llama.batch (" + std::to_string(m.batch) + ")");
  }
  if (m.engine != "llama")
    return;
  if (m.gguf.empty())
    throw config_error("model.llama.gguf", "engine: llama needs a GGUF file (model.llama.gguf)");
  auto facts = cached_facts(m.gguf);
  if (!facts)
    throw config_error("model.llama.gguf", facts.message());
  if (!facts->unsupported.empty())
    throw config_error("model.llama.gguf", "architecture " + facts->architecture +
                                               " is not supported: " + facts->unsupported);
  if (m.context == 0)
    m.context = facts->n_ctx_train;
  if (m.context > facts->n_ctx_train)
    throw config_error("model.llama.context",
                       std::to_string(m.context) + " tokens is larger than the model's context (" +
                           std::to_string(facts->n_ctx_train) + ", " + m.gguf + ")");
  if (!n["max_context"])
    m.max_context = m.context;
  else if (m.max_context > m.context)
    throw config_error("model.max_context",
                       std::to_string(m.max_context) + " exceeds the llama context of " +
                           std::to_string(m.context) + " tokens (model.llama.context)");
  if (!n["name"] && !facts->name.empty())
    m.name = facts->name;
}

} // namespace

model_settings read_model(const deployment_config& dep, const std::string& profile_override,
                          const std::string& worker_path) {
  model_settings m;
  const YAML::Node& n = dep.model;
  if (n && n.IsMap()) {
    check_keys(n, "model",
               {"name", "engine", "block_tokens", "max_context", "reference", "profile", "kv_scale",
                "seed", "kv_content", "llama"});
    if (n["name"])
      m.name = scalar<std::string>(n["name"], "model.name", "a string");
    if (n["engine"])
      m.engine = scalar<std::string>(n["engine"], "model.engine", "a string");
    if (m.engine != "reference" && m.engine != "profile" && m.engine != "llama")
      throw config_error("model.engine", "invalid value \"" + m.engine +
                                             "\" (expected one of: reference, profile, llama)");
    if (n["block_tokens"])
      m.block_tokens = scalar<uint32_t>(n["block_tokens"], "model.block_tokens", "an integer");
    if (m.block_tokens == 0)
      throw config_error("model.block_tokens", "must be at least 1");
    if (n["max_context"])
      m.max_context = scalar<uint32_t>(n["max_context"], "model.max_context", "an integer");
    if (m.max_context < 2)
      throw config_error("model.max_context", "must be at least 2");
    if (auto r = n["reference"]) {
      if (!r.IsMap())
        throw config_error("model.reference", "expected a mapping");
      check_keys(r, "model.reference",
                 {"weight_seed", "d_model", "n_heads", "head_dim", "mlp_hidden", "layer_pattern"});
      if (r["weight_seed"])
        m.weight_seed =
            scalar<uint64_t>(r["weight_seed"], "model.reference.weight_seed", "an integer");
      if (r["d_model"])
        m.d_model = scalar<uint32_t>(r["d_model"], "model.reference.d_model", "an integer");
      if (r["n_heads"])
        m.n_heads = scalar<uint32_t>(r["n_heads"], "model.reference.n_heads", "an integer");
      if (r["head_dim"])
        m.head_dim = scalar<uint32_t>(r["head_dim"], "model.reference.head_dim", "an integer");
      if (r["mlp_hidden"])
        m.mlp_hidden =
            scalar<uint32_t>(r["mlp_hidden"], "model.reference.mlp_hidden", "an integer");
      if (r["layer_pattern"])
        m.layer_pattern =
            scalar<std::string>(r["layer_pattern"], "model.reference.layer_pattern", "a string");
    }
    if (n["profile"])
      m.profile = resolve_path(dep, scalar<std::string>(n["profile"], "model.profile", "a path"));
    if (n["kv_scale"])
      m.kv_scale = scalar<double>(n["kv_scale"], "model.kv_scale", "a number");
    if (!(m.kv_scale > 0.0 && m.kv_scale <= 1.0))
      throw config_error("model.kv_scale", "must be in (0, 1]");
    if (n["seed"])
      m.seed = scalar<uint64_t>(n["seed"], "model.seed", "an integer");
    if (n["kv_content"]) {
      const auto c = scalar<std::string>(n["kv_content"], "model.kv_content", "a string");
      if (c != "tokens" && c != "zeros")
        throw config_error("model.kv_content",
                           "invalid value \"" + c + "\" (expected one of: tokens, zeros)");
      m.kv_content = c == "tokens";
    }
  }
  if (n && n.IsMap())
    read_llama(dep, n, m);
  if (!profile_override.empty())
    m.profile = resolve_path(dep, profile_override);
  if (m.engine == "profile" && m.profile.empty())
    throw config_error(
        worker_path.empty() ? "model.profile" : worker_path + ".profile",
        "engine: profile needs a profile file (model.profile or the worker's profile)");
  return m;
}

std::unique_ptr<engine::engine> make_engine(const model_settings& m, const std::string& where) {
  static engine::real_clock wall; // engines keep a reference; it must outlive them all
  return make_engine(m, where, wall);
}

namespace {

/// A profile file parsed once per file.
engine::result<engine::profile> cached_profile(const std::string& path) {
  return read_once<engine::profile>(path,
                                    [](const std::string& p) { return engine::load_profile(p); });
}

} // namespace

std::unique_ptr<engine::engine> make_engine(const model_settings& m, const std::string& where,
                                            engine::clock& clk) {
  if (m.engine == "llama") {
    engine::llama_config lc;
    lc.gguf = m.gguf;
    lc.context = m.context;
    lc.batch = m.batch;
    lc.ubatch = m.ubatch;
    lc.threads = m.threads;
    lc.slots = m.slots;
    lc.extra_buffer_types = m.extra_buffer_types;
    auto e = engine::make_llama_engine(lc);
    if (!e)
      throw config_error("model.llama", e.message());
    return std::move(e.value());
  }
  if (m.engine == "reference") {
    engine::reference_config rc;
    rc.weight_seed = m.weight_seed;
    rc.d_model = m.d_model;
    rc.n_heads = m.n_heads;
    rc.head_dim = m.head_dim;
    rc.mlp_hidden = m.mlp_hidden;
    rc.layer_pattern = m.layer_pattern;
    auto e = engine::reference_engine::create(rc);
    if (!e)
      throw config_error("model.reference", e.message());
    return std::move(e.value());
  }
  auto prof = cached_profile(m.profile);
  if (!prof)
    throw config_error(where, prof.message());
  engine::profile_engine_config pc;
  pc.kv_scale = m.kv_scale;
  pc.seed = m.seed;
  pc.sleep = true;           // spends its time on `clk`: real sleep, or virtual time
  pc.verify_content = false; // imports are checked by chunk checksums; skip the regeneration
  pc.synthesize_content = m.kv_content;
  auto e = engine::profile_engine::create(std::move(prof.value()), pc, clk);
  if (!e)
    throw config_error(where, e.message());
  return std::move(e.value());
}

std::unique_ptr<engine::tokenizer> make_tokenizer(const model_settings& m) {
  if (m.engine == "llama") {
    auto t = engine::make_llama_tokenizer(m.gguf);
    if (!t)
      throw config_error("model.llama.gguf", t.message());
    return std::move(t.value());
  }
  if (m.engine == "profile")
    return std::make_unique<engine::byte_tokenizer>(163840, 0); // profile_engine's vocabulary
  return std::make_unique<engine::byte_tokenizer>();
}

std::function<double(std::span<const std::byte>)> wire_size_of(const model_settings& m) {
  const double scale = m.engine == "profile" ? 1.0 / m.kv_scale : 1.0;
  // A message holds one engine chunk or several back to back (layers_per_push).
  return [scale](std::span<const std::byte> bytes) {
    double wire = 0;
    while (!bytes.empty()) {
      auto h = engine::parse_header(bytes);
      if (!h || h->payload_bytes > bytes.size() - engine::chunk_header::wire_size)
        break; // not an engine chunk: the rest counts as it is
      const size_t n = engine::chunk_header::wire_size + static_cast<size_t>(h->payload_bytes);
      const double size = static_cast<double>(n);
      const double payload = static_cast<double>(h->payload_bytes);
      // The sequence record travels as it is; KV stands for 1/kv_scale as many bytes.
      wire += h->kind == engine::layer_kind::meta ? size : size - payload + payload * scale;
      bytes = bytes.subspan(n);
    }
    return wire + static_cast<double>(bytes.size());
  };
}

param_spec profile_param() {
  return {"profile", param_kind::string, "\"\"",
          "profile file of this worker's hardware (engine: profile); default model.profile"};
}

param_spec extra_buffer_types_param() {
  return {"extra_buffer_types", param_kind::boolean, "false",
          "engine: llama: this worker's weights in llama.cpp's extra buffer types where the CPU "
          "has them (AMX, repacked Q4/IQ4): faster prompt processing there, but a sequence's "
          "bits then depend on its batch (docs/llama.md)"};
}

model_settings worker_model(const deployment_config& dep, const actor_params& p,
                            const std::string& path) {
  auto m = read_model(dep, p.str("profile"), path);
  m.extra_buffer_types = p.boolean("extra_buffer_types");
  if (m.extra_buffer_types && m.engine != "llama")
    throw config_error(path + ".extra_buffer_types",
                       "only engine: llama has extra buffer types (model.engine is " + m.engine +
                           ")");
  if (m.extra_buffer_types)
    if (auto facts = cached_facts(m.gguf); facts)
      if (auto why = engine::extra_buffer_types_refusal(facts->architecture); !why.empty())
        throw config_error(path + ".extra_buffer_types", why + " (" + m.gguf + ")");
  return m;
}

void check_worker_model(const std::string& path, const actor_params& p,
                        const deployment_config& dep) {
  auto m = worker_model(dep, p, path);
  if (m.engine == "llama")
    return; // read_model checked the GGUF; a context is built when the worker starts
  make_engine(m, p.str("profile").empty() ? "model.profile" : path + ".profile");
}

} // namespace prfaas::serving
