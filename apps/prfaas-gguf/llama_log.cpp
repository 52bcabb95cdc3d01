#include "llama_log.hpp"

#include <llama.h>

#include <cstdio>

namespace prfaas::gguf_tool {

namespace {

struct level_filter {
  ggml_log_level min_level = GGML_LOG_LEVEL_WARN;
  ggml_log_level last_level = GGML_LOG_LEVEL_NONE; ///< of the last non-CONT message
};

level_filter filter_state;

void filtered_stderr(ggml_log_level level, const char* text, void* ud) {
  auto& f = *static_cast<level_filter*>(ud);
  if (level != GGML_LOG_LEVEL_CONT)
    f.last_level = level;
  if (f.last_level >= f.min_level) {
    std::fputs(text, stderr);
    std::fflush(stderr);
  }
}

} // namespace

void set_llama_log_level(ggml_log_level min_level) {
  filter_state.min_level = min_level;
  llama_log_set(filtered_stderr, &filter_state);
}

llama_log_capture::llama_log_capture() {
  llama_log_get(&prev_cb_, &prev_ud_);
  llama_log_set(&llama_log_capture::on_log, this);
}

llama_log_capture::~llama_log_capture() {
  llama_log_set(prev_cb_, prev_ud_);
}

std::string llama_log_capture::errors() const {
  std::string out;
  size_t begin = 0;
  while (begin < errors_.size()) {
    size_t end = errors_.find('\n', begin);
    if (end == std::string::npos)
      end = errors_.size();
    if (end > begin) {
      if (!out.empty())
        out += "; ";
      out.append(errors_, begin, end - begin);
    }
    begin = end + 1;
  }
  return out;
}

void llama_log_capture::on_log(ggml_log_level level, const char* text, void* ud) {
  auto& self = *static_cast<llama_log_capture*>(ud);
  constexpr size_t max_bytes = 1024;
  if (level != GGML_LOG_LEVEL_CONT)
    self.last_level_ = level;
  if (self.last_level_ == GGML_LOG_LEVEL_ERROR) {
    self.errors_ += text;
    if (self.errors_.size() > max_bytes)
      self.errors_.erase(0, self.errors_.size() - max_bytes);
  }
  if (self.prev_cb_ != nullptr)
    self.prev_cb_(level, text, self.prev_ud_);
}

} // namespace prfaas::gguf_tool
