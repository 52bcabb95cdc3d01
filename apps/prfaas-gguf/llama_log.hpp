#pragma once

// llama.cpp's log (process-global, shared with ggml): a level filter for the CLI and a
// scoped capture that keeps the errors for write_model's messages.

#include <ggml.h>

#include <string>

namespace prfaas::gguf_tool {

/// From now on llama.cpp and ggml print messages at `min_level` and above to stderr
/// and drop the rest (continuation lines follow the message they continue).
void set_llama_log_level(ggml_log_level min_level);

/// While alive, llama.cpp's messages are forwarded to the callback installed before
/// and its ERROR messages are also kept; the previous callback is restored on
/// destruction. One at a time: llama.cpp has one logger per process.
class llama_log_capture {
public:
  llama_log_capture();
  ~llama_log_capture();
  llama_log_capture(const llama_log_capture&) = delete;
  llama_log_capture& operator=(const llama_log_capture&) = delete;

  /// The error messages logged so far, one line joined by "; " (the last ~1 KB), or "".
  std::string errors() const;

private:
  static void on_log(ggml_log_level level, const char* text, void* self);

  ggml_log_callback prev_cb_ = nullptr;
  void* prev_ud_ = nullptr;
  ggml_log_level last_level_ = GGML_LOG_LEVEL_NONE; ///< of the last non-CONT message
  std::string errors_; ///< ERROR messages with their CONT lines, oldest trimmed first
};

} // namespace prfaas::gguf_tool
