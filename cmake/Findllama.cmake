# llama.cpp as tools/llama-cpp.sh builds it: the pinned release, fetched from the npm
# registry and built once into a cache outside the work tree. Defines
#   prfaas::llama          llama.h, gguf.h, ggml.h; libllama and libggml*
#   PRFAAS_LLAMA_SOURCE_DIR its sources (engine/ compiles llama.cpp's Jinja engine from them)
#   PRFAAS_LLAMA_RELEASE   the pinned release (e.g. v0.5.0)
#   PRFAAS_LLAMA_SERVER    llama-server of the same build (the side-by-side benchmark)
#   PRFAAS_LLAMA_VOCAB_DIR the release's vocabulary-only GGUFs (models/ggml-vocab-*.gguf)
# PRFAAS_LLAMA_DIR overrides where it is; by default, where tools/llama-cpp.sh puts it.
set(_pin "${PROJECT_SOURCE_DIR}/tools/llama-cpp.sh")
file(STRINGS "${_pin}" _release REGEX "^PIN_RELEASE=")
string(REGEX REPLACE "^PIN_RELEASE=" "" PRFAAS_LLAMA_RELEASE "${_release}")
if(NOT PRFAAS_LLAMA_DIR)
  execute_process(COMMAND bash "${_pin}" --dir OUTPUT_VARIABLE _dir
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "tools/llama-cpp.sh --dir failed")
  endif()
  set(PRFAAS_LLAMA_DIR "${_dir}" CACHE PATH "llama.cpp build (tools/llama-cpp.sh)")
endif()
if(NOT EXISTS "${PRFAAS_LLAMA_DIR}/complete")
  message(FATAL_ERROR "llama.cpp ${PRFAAS_LLAMA_RELEASE} is not built at ${PRFAAS_LLAMA_DIR}: "
                      "run tools/llama-cpp.sh (tools/bootstrap.sh does), or point "
                      "-DPRFAAS_LLAMA_DIR at a folder it built")
endif()
set(_bin "${PRFAAS_LLAMA_DIR}/build/bin")
set(_src "${PRFAAS_LLAMA_DIR}/src")
foreach(_lib llama ggml ggml-base ggml-cpu)
  string(MAKE_C_IDENTIFIER "${_lib}" _var)
  find_library(LLAMA_LIB_${_var} NAMES ${_lib} PATHS "${_bin}" NO_DEFAULT_PATH NO_CACHE)
  if(NOT LLAMA_LIB_${_var})
    message(FATAL_ERROR "lib${_lib}.so not found in ${_bin}")
  endif()
endforeach()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(llama REQUIRED_VARS LLAMA_LIB_llama VERSION_VAR PRFAAS_LLAMA_RELEASE)
if(NOT TARGET prfaas::llama)
  add_library(prfaas::llama INTERFACE IMPORTED)
  # SYSTEM: llama.cpp's headers are not ours to warn about.
  set_target_properties(prfaas::llama PROPERTIES
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${_src}/include;${_src}/ggml/include"
    INTERFACE_INCLUDE_DIRECTORIES "${_src}/include;${_src}/ggml/include"
    INTERFACE_LINK_LIBRARIES "${LLAMA_LIB_llama};${LLAMA_LIB_ggml};${LLAMA_LIB_ggml_base};${LLAMA_LIB_ggml_cpu}"
    INTERFACE_LINK_OPTIONS "LINKER:-rpath,${_bin}")
endif()
set(PRFAAS_LLAMA_SOURCE_DIR "${_src}")
set(PRFAAS_LLAMA_SERVER "${_bin}/llama-server")
set(PRFAAS_LLAMA_VOCAB_DIR "${_src}/models")
