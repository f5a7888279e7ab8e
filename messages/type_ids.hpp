#pragma once

// The CAF type-ID block of baton: every message type that may cross a process.
// A type missing here is silently dropped by CAF 0.17 between processes, so
// tests/messages/cross_process_test.cpp sends each one through a real node.
// The structs inside a message (edge_stats, epoch_result, trace_event) need no
// ID: they only travel inside an encoded actor_report, never on their own.

#include <caf/actor_system_config.hpp>
#include <caf/type_id.hpp>

#include "messages/codec.hpp"
#include "messages/types.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(baton, caf::first_custom_type_id)

  CAF_ADD_TYPE_ID(baton, (baton::messages::microbatch))
  CAF_ADD_TYPE_ID(baton, (baton::messages::gradient))
  CAF_ADD_TYPE_ID(baton, (baton::messages::tensor_set))
  CAF_ADD_TYPE_ID(baton, (baton::messages::credit))
  CAF_ADD_TYPE_ID(baton, (baton::messages::control))
  CAF_ADD_TYPE_ID(baton, (baton::messages::actor_report))
  CAF_ADD_TYPE_ID(baton, (baton::messages::node_report))
  CAF_ADD_TYPE_ID(baton, (baton::messages::spawn_request))
  CAF_ADD_TYPE_ID(baton, (baton::messages::progress))

CAF_END_TYPE_ID_BLOCK(baton)

namespace baton::messages {

/// Registers every baton message type with `cfg`. Call on every node, before
/// the actor system starts.
void register_types(caf::actor_system_config& cfg);

} // namespace baton::messages
