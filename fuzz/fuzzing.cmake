# Included by the top-level CMakeLists.txt (with the tests): builds the
# libFuzzer targets of fuzz/ with clang++ as a project of their own (the main
# build uses g++) and registers their ctest cases:
#   fuzz_<target>_corpus  replays the committed corpus (fast regression)
#   fuzz_<target>         a bounded fuzz session on a copy of that corpus
# Without a clang++ that links -fsanitize=fuzzer, all of it is skipped.

option(BATON_FUZZ "Build the libFuzzer targets (needs clang and libclang-rt-14-dev)" ON)
# 10 s: a smoke session in every test run (the committed corpus is replayed
# whole besides); fuzz for longer with -DBATON_FUZZ_SECONDS=600 or
# fuzz/run_fuzzer.sh (docs/tests.md).
set(BATON_FUZZ_SECONDS 10 CACHE STRING "Length of each bounded fuzz session in ctest")

# Returns in `out` whether `cxx` compiles and links a libFuzzer target.
function(baton_fuzz_probe cxx out)
  set(dir ${PROJECT_BINARY_DIR}/fuzz-probe)
  file(WRITE ${dir}/probe.cpp
    "#include <cstddef>\n#include <cstdint>\n"
    "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
  execute_process(
    COMMAND ${cxx} -fsanitize=fuzzer,address,undefined ${dir}/probe.cpp -o ${dir}/probe
    RESULT_VARIABLE result OUTPUT_QUIET ERROR_VARIABLE error)
  if(result EQUAL 0)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
    message(STATUS "baton fuzz: ${cxx} cannot link -fsanitize=fuzzer: ${error}")
  endif()
endfunction()

if(BATON_FUZZ)
  find_program(BATON_FUZZ_CXX NAMES clang++-14 clang++)
  find_program(BATON_FUZZ_CC NAMES clang-14 clang)
  if(BATON_FUZZ_CXX AND BATON_FUZZ_CC)
    baton_fuzz_probe(${BATON_FUZZ_CXX} baton_fuzz_ok)
  endif()
  if(NOT baton_fuzz_ok)
    message(STATUS "baton fuzz: skipped, no usable clang++ "
                   "(scripts/install-deps.sh installs clang and libclang-rt-14-dev)")
  endif()
endif()

if(BATON_FUZZ AND baton_fuzz_ok)
  message(STATUS "baton fuzz: libFuzzer targets with ${BATON_FUZZ_CXX}")
  include(ExternalProject)
  set(baton_fuzz_dir ${PROJECT_BINARY_DIR}/fuzz)
  ExternalProject_Add(baton_fuzzers
    SOURCE_DIR ${PROJECT_SOURCE_DIR}/fuzz
    BINARY_DIR ${baton_fuzz_dir}
    CMAKE_ARGS
      -DCMAKE_CXX_COMPILER=${BATON_FUZZ_CXX}
      -DCMAKE_C_COMPILER=${BATON_FUZZ_CC}
      -DCMAKE_BUILD_TYPE=RelWithDebInfo
      -DBATON_MAIN_BUILD=${PROJECT_BINARY_DIR}
    CMAKE_CACHE_ARGS -DCMAKE_PREFIX_PATH:STRING=${CMAKE_PREFIX_PATH}
    # The fuzzers compile sources of messages/ and actors/: let their own
    # build decide what is out of date on every build.
    BUILD_ALWAYS ON
    INSTALL_COMMAND ""
    DEPENDS baton_modes baton_modes_common baton_mode_transfer baton_mode_pipeline
      baton_mode_data_parallel baton_mode_ist baton_actors_runtime baton_messages baton_model_core baton_model_planning
      baton_model_transfer baton_model_data_parallel baton_model_ist_mlp baton_model_ist)

  # baton_add_fuzz_test(TARGET CORPUS SECONDS MAX_LEN [DICT]): its two ctest
  # cases; SECONDS is a share of BATON_FUZZ_SECONDS, in percent.
  function(baton_add_fuzz_test target corpus percent max_len)
    set(fuzzer ${baton_fuzz_dir}/${target})
    set(corpus ${PROJECT_SOURCE_DIR}/fuzz/corpus/${corpus})
    math(EXPR seconds "(${BATON_FUZZ_SECONDS} * ${percent} + 99) / 100")
    # -runs=0: execute every input of the corpus once, then stop.
    # Under BATON_TEST_NICE, as every suite that is not SERIAL.
    add_test(NAME ${target}_corpus COMMAND ${BATON_TEST_NICE}
      ${fuzzer} -runs=0 -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 ${corpus})
    add_test(NAME ${target} COMMAND ${BATON_TEST_NICE} bash ${PROJECT_SOURCE_DIR}/fuzz/run_fuzzer.sh
      ${fuzzer} ${corpus} ${baton_fuzz_dir}/run/${target} ${seconds} ${max_len} ${ARGN})
    # One thread each: `ctest -j` runs them beside the other suites
    # (PROCESSORS 1, as baton_add_test's default CORES).
    set_tests_properties(${target}_corpus PROPERTIES LABELS fuzz TIMEOUT 300 PROCESSORS 1)
    set_tests_properties(${target} PROPERTIES LABELS fuzz TIMEOUT 600 PROCESSORS 1)
  endfunction()

  baton_add_fuzz_test(fuzz_messages messages 100 8192)
  baton_add_fuzz_test(fuzz_topology topology 100 8192 ${PROJECT_SOURCE_DIR}/fuzz/topology.dict)
  baton_add_fuzz_test(fuzz_tensor tensor 50 4096)
  baton_add_fuzz_test(fuzz_frame_guard frame_guard 25 4096)
endif()
