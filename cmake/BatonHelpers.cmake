# baton_add_library(NAME SOURCES ... [TORCH_PCH])
#   One library per folder; TORCH_PCH precompiles <torch/torch.h> for it.
function(baton_add_library name)
  cmake_parse_arguments(arg "TORCH_PCH" "" "SOURCES" ${ARGN})
  add_library(${name} STATIC ${arg_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(arg_TORCH_PCH AND BATON_USE_PCH)
    target_precompile_headers(${name} PRIVATE <torch/torch.h>)
  endif()
endfunction()

# baton_add_test(NAME SOURCES ... LIBS ... [SUPPORT] [LABELS ...] [TIMEOUT s])
#   One GoogleTest executable per suite, registered with ctest. SUPPORT links
#   baton_test_support (tests/support/: scratch directories, running baton,
#   node processes), which brings the include path of the source tree.
function(baton_add_test name)
  cmake_parse_arguments(arg "SUPPORT" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE ${arg_LIBS} GTest::gtest GTest::gtest_main)
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
