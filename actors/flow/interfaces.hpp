#pragma once

// The messages every actor role understands, in one place.
//
// The roles are dynamically typed CAF actors (`caf::actor`): the downstream of
// a stage may be another stage or a head, reached in-process or through a
// node, and the same wiring code serves both. Each role's accepted messages:
//
//   spawner (one per node)
//     spawn_request              -> caf::actor | error   start a registered role
//     (get_atom, node_atom)      -> node_report           resources and usage
//
//   source
//     (observe_atom, actor c)    -> ok_atom   report to c; quit when c is down
//     (connect_atom, actor d, string name) -> ok_atom    downstream edge
//     (start_atom)                            begin emitting
//     credit                                  a slot freed downstream
//
//   stage (frozen)
//     observe, connect as above
//     microbatch                              forward, send to every downstream
//     control                                 forwarded in order after the
//                                             microbatches before it
//     credit                                  a slot freed downstream
//
//   pipeline_stage (trainable)
//     observe as above
//     (connect_atom, actor d, string name) -> ok_atom    a downstream (replica), in order
//     (group_atom, actor peer, int32 r)    -> ok_atom    replica r of its group
//     microbatch, control, credit            as a stage; controls counted until every
//                                            upstream replica sent its copy
//     gradient                               backward of a microbatch it forwarded
//     tensor_set{gradients}                  a peer replica's gradient sum of a step
//     sends the coordinator tensor_set{weights} (replica 0) before its final report
//
//   head
//     observe as above
//     microbatch                              train (or evaluate when eval)
//     control                                 epoch_end: report the epoch;
//                                             end_of_stream: final report
//
// Everything an actor tells the coordinator:
//     actor_report   (per epoch: epochs has one entry, final: whole run)
//     progress       (every runtime.progress_every steps)
//     control{start, value = total training samples}   from the source
//     (failure_atom, string actor, uint8 code, string what)
//                                                      a fatal error in an actor: code is
//                                                      its errc (compute_failed, bad_file,
//                                                      actor_failed), the run's error
//     (step_atom, string actor, int64 step)            step done (recovery.notify_from_step)
//     (heartbeat_atom, string actor, int64 step, int64 work, string waiting)
//                                                      liveness, at most once a second while
//                                                      it works, and on (heartbeat_atom)
//                                                      from the coordinator (activity.hpp)
//     (trained_atom, string actor, int64 trained, int64 duplicates)
//                                                      before the final report of a
//                                                      trainable actor (exactly-once counts)
//
// The coordinator tells a spawner (fault injection, `faults:`):
//     (fault_atom, string kind, int32 ms)   kind "kill": SIGKILL the node's process;
//                                           "stop": SIGSTOP it for ms milliseconds

#include <caf/atom.hpp>

namespace baton::actors {
inline namespace flow {

using observe_atom = caf::atom_constant<caf::atom("observe")>;
using connect_atom = caf::atom_constant<caf::atom("connect")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
using node_atom = caf::atom_constant<caf::atom("node")>;
using final_atom = caf::atom_constant<caf::atom("final")>;
using epoch_atom = caf::atom_constant<caf::atom("epoch")>;
using group_atom = caf::atom_constant<caf::atom("group")>;
using failure_atom = caf::atom_constant<caf::atom("failure")>;
using step_atom = caf::atom_constant<caf::atom("step")>;
using trained_atom = caf::atom_constant<caf::atom("trained")>;
using fault_atom = caf::atom_constant<caf::atom("fault")>;
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>;

} // namespace flow
} // namespace baton::actors
