# Injected into llama-cpp-python's top-level CMake project by `make env` (CMAKE_PROJECT_llama_cpp_INCLUDE).
#
# llama-cpp-python forces llama.cpp's `llama-common` library on (arg parsing, chat templates, JSON: about half of
# the compile on 2 cores) and installs it, but its Python bindings load only libllama and ggml; `llama-common` is
# linked by llama.cpp's tools and the multimodal library, which `make env` leaves out (LLAVA_BUILD=OFF). With
# scikit-build-core building only the `llama` target (SKBUILD_BUILD_TARGETS), this drops `llama-common`'s
# install rule, the one rule that would look for the library that was not built.
function(install)
  if(ARGV0 STREQUAL "TARGETS" AND ARGV1 STREQUAL "llama-common")
    return()
  endif()
  _install(${ARGV})
endfunction()
