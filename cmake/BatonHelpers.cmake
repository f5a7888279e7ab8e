# baton_add_library(NAME SOURCES ...)
#   One library per folder, compiled in unity batches, with the precompiled
#   <torch/torch.h> for the units that need it (baton_units).
function(baton_add_library name)
  cmake_parse_arguments(arg "" "" "SOURCES" ${ARGN})
  add_library(${name} STATIC ${arg_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  baton_units(${name} UNITY)
endfunction()

# baton_reaches_torch(FILE OUT)
#   Sets OUT to whether FILE includes a <torch/...> header (LibTorch's C++
#   frontend: torch/nn, torch/script.h, torch/torch.h), itself or through the
#   tree's own headers ("actors/...", "model/..."). ATen's and c10's headers,
#   which tensors need, do not count. Each file is read once per configure.
function(baton_reaches_torch file out)
  string(MAKE_C_IDENTIFIER "${file}" key)
  get_property(known GLOBAL PROPERTY BATON_REACHES_TORCH_${key} SET)
  if(known)
    get_property(result GLOBAL PROPERTY BATON_REACHES_TORCH_${key})
    set(${out} ${result} PARENT_SCOPE)
    return()
  endif()
  # Marked first, so that headers including each other end the walk.
  set_property(GLOBAL PROPERTY BATON_REACHES_TORCH_${key} FALSE)
  set(result FALSE)
  file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  foreach(line IN LISTS includes)
    if(line MATCHES "include[ \t]*<torch/")
      set(result TRUE)
      break()
    endif()
    if(line MATCHES "include[ \t]*\"([^\"]+)\"")
      set(header ${PROJECT_SOURCE_DIR}/${CMAKE_MATCH_1})
      if(EXISTS ${header})
        baton_reaches_torch(${header} header_reaches)
        if(header_reaches)
          set(result TRUE)
          break()
        endif()
      endif()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY BATON_REACHES_TORCH_${key} ${result})
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# baton_units(NAME [UNITY])
#   How NAME's translation units are compiled.
#   - The units that reach LibTorch's C++ frontend (baton_reaches_torch) get
#     the precompiled <torch/torch.h>; the others are compiled without it
#     (SKIP_PRECOMPILE_HEADERS). Parsed, torch/torch.h costs a unit 15-25 s of
#     CPU; loading it precompiled (570 MB) 10-15 s, which a unit that needs
#     only ATen's Tensor and CAF would pay for nothing. The header is compiled
#     once, for the first target that needs it (baton_model_core), and reused
#     by the others: every target of the tree is compiled with the same
#     definitions and language flags (GCC would ignore a precompiled header
#     built with others; -Winvalid-pch says so). LibTorch's headers include
#     fmt's, whose definitions come with spdlog: every such target links it,
#     so that they all see the same.
#   - UNITY (with BATON_UNITY, the default): the units are compiled in
#     batches of up to BATON_UNITY_BATCH, one source including them (a unity
#     build), those of the frontend apart from the others. A batch parses its
#     headers and instantiates CAF's and LibTorch's templates once: four units
#     of actors/runtime took 27 s of CPU together against 58 s apart. Names
#     at file scope of one unit (anonymous namespaces included) are seen by
#     the next of its batch, so two units of a library do not define the same.
#   Which units reach the frontend is read at configure time: after an
#   include changes it, the build stays correct and re-running cmake makes it
#   fast again.
function(baton_units name)
  cmake_parse_arguments(arg "UNITY" "" "" ${ARGN})
  get_target_property(sources ${name} SOURCES)
  set(torch_units "")
  set(plain_units "")
  foreach(source IN LISTS sources)
    if(NOT source MATCHES "\\.cpp$")
      continue()
    endif()
    get_filename_component(path ${source} ABSOLUTE)
    baton_reaches_torch(${path} reaches)
    if(reaches)
      list(APPEND torch_units ${source})
    else()
      list(APPEND plain_units ${source})
    endif()
  endforeach()

  if(BATON_USE_PCH)
    if(plain_units)
      set_source_files_properties(${plain_units} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
    if(torch_units)
      target_link_libraries(${name} PRIVATE spdlog::spdlog)
      get_property(donor GLOBAL PROPERTY BATON_TORCH_PCH_TARGET)
      if(donor)
        target_precompile_headers(${name} REUSE_FROM ${donor})
      else()
        target_precompile_headers(${name} PRIVATE <torch/torch.h>)
        set_property(GLOBAL PROPERTY BATON_TORCH_PCH_TARGET ${name})
      endif()
    endif()
  endif()

  if(NOT (arg_UNITY AND BATON_UNITY))
    return()
  endif()
  set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
  foreach(kind torch plain)
    set(index 0)
    foreach(source IN LISTS ${kind}_units)
      math(EXPR batch "${index} / ${BATON_UNITY_BATCH}")
      set_source_files_properties(${source} PROPERTIES UNITY_GROUP ${kind}${batch})
      math(EXPR index "${index} + 1")
      if(kind STREQUAL "plain")
        # The source CMake writes for the batch: it must not load the
        # precompiled header either.
        set_source_files_properties(
          ${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/${name}.dir/Unity/unity_${kind}${batch}_cxx.cxx
          PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endforeach()
  endforeach()
endfunction()

# baton_add_test(NAME SOURCES ... LIBS ... [SUPPORT] [SERIAL] [LABELS ...] [TIMEOUT s]
#                [CORES n] [COST s] [DEFINES NAME=VALUE ...])
#   One GoogleTest suite, registered with ctest as NAME. With
#   BATON_TEST_GROUPS (the default) the suites of a folder are compiled
#   into one executable, <folder>_tests (tests/messages: messages_tests; the
#   subfolders of a layer that sets BATON_TEST_LAYER share the layer's:
#   tests/model/core and tests/model/ist are in model_tests, tests/modes/*
#   in modes_tests, tests/config, flow, net, roles and runtime in
#   actors_tests), in unity batches (baton_units), and ctest runs NAME as that executable
#   with a --gtest_filter of the suite's own test cases (the TEST names its
#   source declares); without it each suite is an executable named NAME. A
#   unity batch parses GoogleTest's, CAF's and LibTorch's headers once (the
#   precompiled <torch/torch.h> is 570 MB: loading it and parsing cost a
#   unit about 13 s of CPU before any code is generated; the test units took
#   1,461 s one by one, 678 s in batches), so names at file scope of a test
#   (anonymous namespaces included) are seen by the next of its batch: they
#   must differ between the suites of an executable.
#   SUPPORT links baton_test_support (tests/support/: scratch directories,
#   running baton, node processes), which brings the include path of the
#   source tree. Units that reach LibTorch's C++ frontend get the
#   precompiled <torch/torch.h> (baton_units). CORES: the cores the suite
#   keeps busy (ctest's PROCESSORS), 1 unless given: measured, a suite keeps
#   1.0 to 1.6 cores busy (docs/tests.md), so `ctest -j2` runs two side by
#   side. SERIAL: for the suites whose detection timeouts or measured rates
#   assume the cores are theirs: they run one at a time (RESOURCE_LOCK
#   baton_timed) at the normal priority, and every other suite runs under
#   `nice -n 10` (baton_test_command), so beside a SERIAL suite a neighbour
#   gets only the cycles it leaves (CFS weighs nice 0 to nice 10 as 1024 to
#   110). They ran alone at the end before (RUN_SERIAL): about 160 s with
#   one core mostly idle.
#   COST: its seconds, so that ctest starts the longest suites first (it
#   orders by COST until it has measured them).
option(BATON_TEST_GROUPS "Compile each test folder's suites into one executable" ON)

function(baton_add_test name)
  cmake_parse_arguments(arg "SUPPORT;SERIAL" "TIMEOUT;CORES;COST" "SOURCES;LIBS;LABELS;DEFINES"
    ${ARGN})
  if(BATON_TEST_GROUPS)
    # The folder whose suites share the executable: this one, or the layer's
    # (BATON_TEST_LAYER, set by tests/model/ and tests/modes/ for their
    # subfolders, and by tests/ for the layers of actors/, which it names
    # BATON_TEST_LAYER_NAME).
    if(BATON_TEST_LAYER)
      set(owner ${BATON_TEST_LAYER})
    else()
      set(owner ${CMAKE_CURRENT_SOURCE_DIR})
    endif()
    if(BATON_TEST_LAYER_NAME)
      set(group ${BATON_TEST_LAYER_NAME})
    else()
      file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR}/tests ${owner})
      string(MAKE_C_IDENTIFIER "${folder}" group)
    endif()
    set(executable ${group}_tests)
    set(sources "")
    foreach(source IN LISTS arg_SOURCES)
      get_filename_component(source ${source} ABSOLUTE) # from this folder
      list(APPEND sources ${source})
    endforeach()
    set(arg_SOURCES ${sources})
    get_property(started DIRECTORY ${owner} PROPERTY BATON_TEST_GROUP_SOURCES SET)
    if(NOT started)
      # A deferred call's arguments are read when it runs: the name waits in
      # a property of the folder, whose end adds the executable.
      set_property(DIRECTORY ${owner} PROPERTY BATON_TEST_GROUP ${executable})
      cmake_language(DEFER DIRECTORY ${owner} CALL baton_add_test_group)
    endif()
    set_property(DIRECTORY ${owner} APPEND PROPERTY BATON_TEST_GROUP_SOURCES ${arg_SOURCES})
    set_property(DIRECTORY ${owner} APPEND PROPERTY BATON_TEST_GROUP_LIBS ${arg_LIBS})
    set_property(DIRECTORY ${owner} APPEND PROPERTY BATON_TEST_GROUP_DEFINES ${arg_DEFINES})
    if(arg_SUPPORT)
      set_property(DIRECTORY ${owner} PROPERTY BATON_TEST_GROUP_SUPPORT ON)
    endif()
    # The suite's own test cases: TEST(suite, ...), TEST_F, TEST_P (whose
    # instances are PREFIX/suite.case/N).
    set(filter "")
    foreach(source IN LISTS arg_SOURCES)
      file(STRINGS ${source} declarations REGEX "^(TEST|TEST_F|TEST_P)\\(")
      foreach(line IN LISTS declarations)
        string(REGEX REPLACE "^TEST(_F|_P)?\\([ \t]*([A-Za-z0-9_]+).*" "\\2" suite "${line}")
        list(APPEND filter "${suite}.*" "*/${suite}.*")
      endforeach()
    endforeach()
    list(REMOVE_DUPLICATES filter)
    if(NOT filter)
      message(FATAL_ERROR "baton_add_test(${name}): no TEST in ${arg_SOURCES}")
    endif()
    list(JOIN filter ":" filter)
    baton_test_command(command ${executable} "${arg_SERIAL}")
    add_test(NAME ${name} COMMAND ${command} --gtest_color=no --gtest_filter=${filter})
  else()
    add_executable(${name} ${arg_SOURCES})
    baton_link_test(${name} "${arg_LIBS}" ${arg_SUPPORT})
    target_compile_definitions(${name} PRIVATE ${arg_DEFINES})
    baton_units(${name})
    baton_test_command(command ${name} "${arg_SERIAL}")
    add_test(NAME ${name} COMMAND ${command} --gtest_color=no)
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 600)
  endif()
  if(NOT arg_CORES)
    set(arg_CORES 1)
  endif()
  # OMP_WAIT_POLICY=PASSIVE: two suites share the cores (`ctest -j2`), so a
  # run's OpenMP threads (LibTorch's intra-op pool, OpenBLAS) that wait for
  # work sleep instead of spinning on a core the other suite needs: a
  # 2-thread pretraining beside a busy core took 55 s of CPU spinning, 33 s
  # passive, and 20% less time (docs/tests.md). The arithmetic is the same.
  set_tests_properties(${name} PROPERTIES TIMEOUT ${arg_TIMEOUT} PROCESSORS ${arg_CORES}
    LABELS "${arg_LABELS}" WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
  if(arg_SERIAL)
    set_tests_properties(${name} PROPERTIES RESOURCE_LOCK baton_timed)
  endif()
  if(arg_COST)
    set_tests_properties(${name} PROPERTIES COST ${arg_COST})
  endif()
endfunction()

# baton_test_optimization(TARGET)
#   Test code compiles at -O1 (after the build type's -O2, so it wins): a
#   suite's own code asserts and drives runs, and the code under test comes
#   from the libraries, compiled -O2. A unity batch of the data-parallel
#   suites took 28 s of CPU at -O1 against 43 s at -O3. GCC takes the
#   precompiled <torch/torch.h> (built at -O2) at -O1 too: both define
#   __OPTIMIZE__, and -Winvalid-pch would say otherwise. The arithmetic is
#   the same (no -ffast-math, no contraction of float expressions in ISO C++).
function(baton_test_optimization target)
  target_compile_options(${target} PRIVATE -O1)
endfunction()

# What every test that is not SERIAL runs under (baton_test_command, and the
# fuzz targets of fuzz/fuzzing.cmake): the processes a test starts inherit it.
set(BATON_TEST_NICE nice -n 10)

# baton_test_command(OUT EXECUTABLE SERIAL)
#   The command line that runs EXECUTABLE (a target) as a suite: under
#   BATON_TEST_NICE unless SERIAL (baton_add_test), so a SERIAL suite keeps its
#   cores beside any other.
function(baton_test_command out executable serial)
  if(serial)
    set(${out} $<TARGET_FILE:${executable}> PARENT_SCOPE)
  else()
    set(${out} ${BATON_TEST_NICE} $<TARGET_FILE:${executable}> PARENT_SCOPE)
  endif()
endfunction()

# baton_link_test(TARGET LIBS SUPPORT)
#   What a test executable links and is compiled with.
function(baton_link_test target libs support)
  # The heap baton runs on (apps/tuned_heap.cpp), tuned before LibTorch
  # initialises: the suites' own training runs on it too.
  # baton_test_tmpdir: the program's own $TMPDIR (tests/support/test_tmpdir.cpp).
  target_link_libraries(${target} PRIVATE baton_tuned_heap baton_test_tmpdir ${libs}
                        GTest::gtest GTest::gtest_main)
  baton_test_optimization(${target})
  if(support)
    target_link_libraries(${target} PRIVATE baton_test_support)
  endif()
  target_compile_definitions(${target} PRIVATE
    BATON_BINARY="$<TARGET_FILE:baton>"
    BATON_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(${target} baton)
endfunction()

# baton_add_test_group()
#   The executable of a folder's suites (BATON_TEST_GROUPS), called once the
#   folder's CMakeLists.txt has added them all.
function(baton_add_test_group)
  get_property(executable DIRECTORY PROPERTY BATON_TEST_GROUP)
  get_property(sources DIRECTORY PROPERTY BATON_TEST_GROUP_SOURCES)
  get_property(libs DIRECTORY PROPERTY BATON_TEST_GROUP_LIBS)
  get_property(support DIRECTORY PROPERTY BATON_TEST_GROUP_SUPPORT)
  get_property(defines DIRECTORY PROPERTY BATON_TEST_GROUP_DEFINES)
  if(libs)
    list(REMOVE_DUPLICATES libs)
  endif()
  add_executable(${executable} ${sources})
  baton_link_test(${executable} "${libs}" "${support}")
  target_compile_definitions(${executable} PRIVATE ${defines})
  # A unity batch includes the suites' sources: GCC then takes a fixture of a
  # suite's anonymous namespace for one of a header's and warns that its
  # tests derive from it; each suite is still one source of its own.
  target_compile_options(${executable} PRIVATE -Wno-subobject-linkage)
  baton_units(${executable} UNITY)
endfunction()
