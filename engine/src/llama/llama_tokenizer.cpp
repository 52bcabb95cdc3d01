// The tokenizer of a GGUF (llama_engine.hpp): llama.cpp's vocabulary (loaded without
// weights) for text ↔ tokens, and llama.cpp's Jinja engine (llama-common's chat
// templates, what llama-server uses) for the GGUF's own chat template.

#include "prfaas/engine/llama_engine.hpp"

#include "llama/model_store.hpp"

#include <chat.h>
#include <llama.h>

namespace prfaas::engine {

namespace {

class llama_tokenizer final : public tokenizer {
public:
  explicit llama_tokenizer(std::shared_ptr<llama_detail::loaded_model> m)
      : m_(std::move(m)), vocab_(llama_model_get_vocab(m_->model)),
        n_vocab_(static_cast<uint32_t>(llama_vocab_n_tokens(vocab_))),
        templates_(common_chat_templates_init(m_->model, "")) {}

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
    common_chat_templates_inputs in;
    for (auto& m : messages) {
      common_chat_msg msg;
      msg.role = m.role;
      msg.content = m.content;
      in.messages.push_back(std::move(msg));
    }
    in.add_generation_prompt = true;
    in.use_jinja = true;
    try {
      return common_chat_templates_apply(templates_.get(), in).prompt;
    } catch (const std::exception& e) {
      return make_error(std::string{"the model's chat template refused the messages: "} + e.what());
    }
  }

  bool chat_has_special() const override { return true; }

private:
  std::shared_ptr<llama_detail::loaded_model> m_;
  const llama_vocab* vocab_;
  uint32_t n_vocab_;
  common_chat_templates_ptr templates_;
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
