# baton_add_library(NAME SOURCES ... [TORCH_PCH])
#   One library per folder; TORCH_PCH precompiles <torch/torch.h> for it
#   (baton_torch_pch).
function(baton_add_library name)
  cmake_parse_arguments(arg "TORCH_PCH" "" "SOURCES" ${ARGN})
  add_library(${name} STATIC ${arg_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(arg_TORCH_PCH)
    baton_torch_pch(${name})
  endif()
endfunction()

# baton_torch_pch(NAME)
#   Gives NAME's translation units the precompiled <torch/torch.h>. It is
#   compiled once, for the first target that asks (baton_model_core), and
#   reused by the others: every target of the tree is compiled with the same
#   definitions and language flags (GCC would ignore a precompiled header
#   built with others; -Winvalid-pch says so). Loading it costs about a
#   second, parsing torch/nn four to nine: only targets whose sources reach
#   LibTorch's C++ frontend ask for it. LibTorch's headers include fmt's,
#   whose definitions come with spdlog: every such target links it, so that
#   they all see the same.
function(baton_torch_pch name)
  if(NOT BATON_USE_PCH)
    return()
  endif()
  target_link_libraries(${name} PRIVATE spdlog::spdlog)
  get_property(donor GLOBAL PROPERTY BATON_TORCH_PCH_TARGET)
  if(donor)
    target_precompile_headers(${name} REUSE_FROM ${donor})
  else()
    target_precompile_headers(${name} PRIVATE <torch/torch.h>)
    set_property(GLOBAL PROPERTY BATON_TORCH_PCH_TARGET ${name})
  endif()
endfunction()

# baton_add_test(NAME SOURCES ... LIBS ... [SUPPORT] [TORCH_PCH] [LABELS ...] [TIMEOUT s])
#   One GoogleTest executable per suite, registered with ctest. SUPPORT links
#   baton_test_support (tests/support/: scratch directories, running baton,
#   node processes), which brings the include path of the source tree.
#   TORCH_PCH: the suite reaches LibTorch's C++ frontend (torch/torch.h,
#   torch/nn: layered_model.hpp and what includes it) and reuses the
#   precompiled header (baton_torch_pch).
function(baton_add_test name)
  cmake_parse_arguments(arg "SUPPORT;TORCH_PCH" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE ${arg_LIBS} GTest::gtest GTest::gtest_main)
  if(arg_TORCH_PCH)
    baton_torch_pch(${name})
  endif()
  if(arg_SUPPORT)
    target_link_libraries(${name} PRIVATE baton_test_support)
  endif()
  target_compile_definitions(${name} PRIVATE
    BATON_BINARY="$<TARGET_FILE:baton>"
    BATON_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(${name} baton)
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 600)
  endif()
  add_test(NAME ${name} COMMAND ${name} --gtest_color=no)
  set_tests_properties(${name} PROPERTIES TIMEOUT ${arg_TIMEOUT}
    LABELS "${arg_LABELS}" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endfunction()
