// prfaas-gguf: writes a random-weight GGUF model of a llama.cpp architecture with a real
// tokenizer vocabulary, for tests (tiny) and benchmarks (bench).
//   prfaas-gguf --arch qwen35 --size tiny -o qwen35-tiny.gguf
//   prfaas-gguf --arch qwen35 --size bench --type f16 -o qwen35-bench.gguf
//   prfaas-gguf --list
// Exit codes: 0 written, 1 the write failed, 2 bad arguments.

#include "arch_table.hpp"
#include "gguf_model.hpp"
#include "llama_log.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

namespace {

using namespace prfaas::gguf_tool;

void print_list() {
  for (const auto& a : arch_table()) {
    const shape_summary tiny = a.summary(model_size::tiny);
    const shape_summary bench = a.summary(model_size::bench);
    std::printf("%-13s %s; tiny %u layers (%u attention) x %u, bench %u layers (%u attention) "
                "x %u; vocab %.*s\n",
                std::string(a.name).c_str(), std::string(a.layout).c_str(), tiny.n_layer,
                tiny.n_attention_layers, tiny.n_embd, bench.n_layer, bench.n_attention_layers,
                bench.n_embd, static_cast<int>(a.default_vocab.size()), a.default_vocab.data());
  }
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"prfaas-gguf: a random-weight GGUF model of a llama.cpp architecture with a "
               "real tokenizer vocabulary"};
  model_spec spec;
  std::string out;
  bool list = false;
  bool verbose = false;
  auto* list_flag = app.add_flag("--list", list, "print the supported architectures and exit");
  app.add_option("--arch", spec.arch, "llama.cpp architecture (see --list)")
      ->check(CLI::IsMember(supported_archs()))
      ->excludes(list_flag);
  app.add_option("--size", spec.size, "tiny (tests) or bench (~0.5-1B)")
      ->check(CLI::IsMember({"tiny", "bench"}))
      ->capture_default_str();
  app.add_option("--vocab", spec.vocab_path,
                 "vocabulary-only GGUF (default: the arch's ggml-vocab-*.gguf in --vocab-dir)");
  app.add_option("--vocab-dir", spec.vocab_dir,
                 "llama.cpp's models/ directory, where the default vocabularies are");
  app.add_option("--seed", spec.seed, "weights seed (same seed, same bytes)")
      ->capture_default_str();
  app.add_option("--stdev", spec.stdev, "standard deviation of the weight matrices")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--type", spec.type,
                 "type of the weight matrices (norms, biases, SSM params stay f32)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}))
      ->capture_default_str();
  app.add_option("--ctx", spec.n_ctx_train, "context_length (default: tiny 8192, bench 32768)");
  app.add_option("--name", spec.name, "general.name (default: prfaas-<size>-<arch>)");
  app.add_option("-o,--out", out, "the GGUF file to write")->excludes(list_flag);
  app.add_flag("-v,--verbose", verbose, "show llama.cpp's log");

  try {
    app.parse(argc, argv);
    if (!list && (spec.arch.empty() || out.empty()))
      throw CLI::RequiredError("--arch and -o (or --list)");
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (list) {
    print_list();
    return 0;
  }

  set_llama_log_level(verbose ? GGML_LOG_LEVEL_DEBUG : GGML_LOG_LEVEL_WARN);
  model_report r;
  if (const std::string err = write_model(spec, out, &r); !err.empty()) {
    std::cerr << "prfaas-gguf: " << err << "\n";
    return 1;
  }
  std::printf("wrote %s: %s %s %s, %u layers (%u attention), n_embd %u, vocab %u (%s), ctx %u, "
              "%.1fM params, %.1f MB\n",
              out.c_str(), spec.arch.c_str(), spec.size.c_str(), spec.type.c_str(), r.n_layer,
              r.n_attention_layers, r.n_embd, r.n_vocab, r.vocab_path.c_str(), r.n_ctx_train,
              r.n_params / 1e6, r.file_bytes / 1e6);
  return 0;
}
