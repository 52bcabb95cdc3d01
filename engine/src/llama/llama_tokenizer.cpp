// The tokenizer of a GGUF (llama_engine.hpp): llama.cpp's vocabulary (loaded without
// weights) for text ↔ tokens, and llama.cpp's Jinja engine (what llama-server renders
// chat templates with) for the GGUF's own chat template, given the conversation,
// bos_token, eos_token and add_generation_prompt as llama-server gives them.

#include "prfaas/engine/llama_engine.hpp"

#include "llama/model_store.hpp"

#include <jinja/lexer.h>
#include <jinja/parser.h>
#include <jinja/runtime.h>
#include <json.h>
#include <llama.h>

namespace prfaas::engine {

namespace {

/// For a GGUF without a chat template: ChatML, llama-server's fallback too.
constexpr const char* chatml =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' "
    "}}{% endif %}";

std::string token_text(const llama_vocab* v, llama_token t) {
  const char* s = t >= 0 ? llama_vocab_get_text(v, t) : nullptr;
  return s ? s : "";
}

class llama_tokenizer final : public tokenizer {
public:
  /// Parses the chat template; throws (jinja's exceptions) when it does not parse.
  explicit llama_tokenizer(std::shared_ptr<llama_detail::loaded_model> m)
      : m_(std::move(m)), vocab_(llama_model_get_vocab(m_->model)),
        n_vocab_(static_cast<uint32_t>(llama_vocab_n_tokens(vocab_))),
        bos_(token_text(vocab_, llama_vocab_bos(vocab_))),
        eos_(token_text(vocab_, llama_vocab_eos(vocab_))) {
    const char* src = llama_model_chat_template(m_->model, nullptr);
    jinja::lexer lexer;
    auto lexed = lexer.tokenize(src ? src : chatml);
    program_ = jinja::parse_from_tokens(lexed);
    source_ = lexed.source;
  }

  uint32_t vocab_size() const override { return n_vocab_; }
  bool is_end(token t) const override { return llama_vocab_is_eog(vocab_, t); }

  result<std::vector<token>> tokenize(std::string_view text, bool add_special,
                                      bool parse_special) const override {
    if (text.size() > static_cast<size_t>(INT32_MAX / 2))
      return make_error("text of " + std::to_string(text.size()) + " bytes is too long");
    std::vector<token> out(text.size() + 8);
    int32_t n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), out.data(),
                               static_cast<int32_t>(out.size()), add_special, parse_special);
    if (n < 0) { // more tokens than bytes (special markers added): exactly -n
      out.resize(static_cast<size_t>(-n));
      n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), out.data(),
                         static_cast<int32_t>(out.size()), add_special, parse_special);
    }
    if (n < 0)
      return make_error("the vocabulary could not tokenize the text");
    out.resize(static_cast<size_t>(n));
    return out;
  }

  std::string piece(token t) const override {
    if (t < 0 || static_cast<uint32_t>(t) >= n_vocab_ || is_end(t))
      return {};
    char buf[128];
    int32_t n = llama_token_to_piece(vocab_, t, buf, sizeof buf, 0, false);
    if (n >= 0)
      return std::string(buf, static_cast<size_t>(n));
    std::string big(static_cast<size_t>(-n), '\0');
    n = llama_token_to_piece(vocab_, t, big.data(), static_cast<int32_t>(big.size()), 0, false);
    big.resize(static_cast<size_t>(std::max(n, 0)));
    return big;
  }

  result<std::string> chat_prompt(std::span<const chat_message> messages) const override {
    try {
      common_json msgs = common_json::array();
      for (auto& m : messages) {
        common_json msg = common_json::object();
        msg["role"] = m.role;
        msg["content"] = m.content;
        msgs.push_back(msg);
      }
      common_json in = common_json::object();
      in["messages"] = msgs;
      in["bos_token"] = bos_;
      in["eos_token"] = eos_;
      in["add_generation_prompt"] = true;
      jinja::context ctx(source_);
      jinja::global_from_json(ctx, in, false);
      jinja::runtime runtime(ctx);
      std::string out =
          jinja::runtime::gather_string_parts(runtime.execute(program_))->as_string().str();
      // The tokenizer adds the BOS the vocabulary asks for; one the template wrote too
      // would be a second (llama-server strips it the same way).
      if (llama_vocab_get_add_bos(vocab_) && !bos_.empty() && out.rfind(bos_, 0) == 0)
        out.erase(0, bos_.size());
      return out;
    } catch (const std::exception& e) {
      return make_error(std::string{"the model's chat template refused the messages: "} + e.what());
    }
  }

  bool chat_has_special() const override { return true; }

private:
  std::shared_ptr<llama_detail::loaded_model> m_;
  const llama_vocab* vocab_;
  uint32_t n_vocab_;
  std::string bos_, eos_;
  jinja::program program_;
  std::string source_;
};

} // namespace

result<std::unique_ptr<tokenizer>> make_llama_tokenizer(const std::string& gguf) {
  auto m = llama_detail::load_model(gguf, true);
  if (!m)
    return m.err();
  try {
    return std::unique_ptr<tokenizer>(new llama_tokenizer(std::move(m).value()));
  } catch (const std::exception& e) {
    return make_error(gguf + ": its chat template does not parse: " + e.what());
  }
}

} // namespace prfaas::engine
