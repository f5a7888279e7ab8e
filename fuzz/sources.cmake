# The main tree's sources that the fuzzers compile themselves, instrumented
# (fuzz/CMakeLists.txt), relative to the source tree's root. A fuzzer takes
# what it does not define from the main build's archives, whose unity batches
# hold these units too: its own, instrumented definitions come first
# (fuzz/CMakeLists.txt, --allow-multiple-definition).
set(BATON_FUZZ_MESSAGES_SOURCES
  messages/errc.cpp
  messages/codec.cpp
  messages/crossing_cpu.cpp
  messages/fields.cpp
  messages/shared_memory.cpp
  messages/tensor_codec.cpp
  messages/to_string.cpp
  messages/type_ids.cpp)
# The topology and node.yaml parsers, with the modes' sections. The list of
# modes that holds their schemas (actors/modes/registry.cpp, a table that
# parses nothing) comes from the main build's archive, with each mode's plan
# and local reference.
set(BATON_FUZZ_CONFIG_SOURCES
  actors/runtime/node_settings.cpp
  actors/config/topology.cpp
  actors/config/yaml_field.cpp
  actors/modes/batch_norm.cpp
  actors/modes/one_task.cpp
  actors/modes/data_parallel/section.cpp
  actors/modes/data_parallel/worker_settings.cpp
  actors/modes/data_parallel/freeze_section.cpp
  actors/modes/ist/section.cpp
  actors/modes/pipeline/section.cpp
  actors/modes/transfer/section.cpp)
# The BASP frame guard (CAF-free).
set(BATON_FUZZ_FRAME_GUARD_SOURCES actors/net/frame_guard.cpp)
