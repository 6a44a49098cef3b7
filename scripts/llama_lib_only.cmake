# Passed to llama-cpp-python's build as CMAKE_PROJECT_INCLUDE (Makefile, LLAMA_CMAKE): runs after
# each project() call. llama-cpp-python forces LLAMA_BUILD_COMMON on (CACHE ... FORCE), so a -D
# cannot turn it off; llama.cpp's `common` library (chat parsers, jinja, an HTTP client) is
# neither installed nor loaded by the Python package, so building it only costs time. Turning it
# off here, after llama.cpp's project() and before llama.cpp reads the option, leaves every
# ggml and llama compile command unchanged (bench/cold_setup.sh compares them).
if(PROJECT_NAME STREQUAL "llama.cpp")
  set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
endif()
