#pragma once

// Every message of a job, in one place: what each role accepts (-> its
// reply), what it sends to whom and when, and what the coordinator and the
// node processes send. Enough to write a new role (register it in
// actors/modes/registry.cpp all_roles; its factory: roles/role_type.hpp).
//
// The roles are dynamically typed CAF actors (`caf::actor`): the downstream of
// a stage may be another stage or a head, reached in-process or through a
// node, and the same wiring code serves both. Messages are the structs of
// messages/types.hpp and the atoms below; `c` is the coordinator, `W`
// workers, `S` shards. A struct with `invalid` set (undecodable bytes) is
// refused: the actor fails.
//
// Every role of a node's table (actors/modes/registry.cpp all_roles) and its
// section below:
//
//   source                                       == source
//   stage, head                                  == transfer
//   pipeline_stage                               == pipeline
//   data_parallel_worker, data_parallel_shard    == data-parallel
//   ist_worker, ist_shard, resist_worker,        == ist (one protocol, two schemes)
//   resist_shard
//
// and what is not a role: a node's spawner and pulse (== The node), the
// coordinator (== The coordinator). Every role also speaks the shared part
// (== One pass of a job, == Shared handlers).
//
// == One pass of a job (runtime/job_pass.hpp, coordinator.cpp) ==============
//
//   spawn    a node's spawner <- spawn_request{role, name, settings}: the
//            plan's settings (YAML) plus `run:` (run_settings: restore_step,
//            and for a trainable actor checkpoint_dir/every, run_id,
//            throw_at_step, notify_from_step; trace); c monitors the actor
//   wire     (observe_atom, c) to every actor, then the plan's edges in order:
//            data (connect_atom, receiver, name) to the sender, peer
//            (group_atom, peer, int32 index) to `from`; each a request -> ok_atom
//   arm      (fault_atom, "delay"|"drop", to, value) to the sender of each edge
//            fault, a request -> ok_atom
//   start    (start_atom) to the actors the plan `starts`
//   train    the messages below, until every actor sent one (final_atom, report)
//   restart  a failure the topology recovers from: exit(user_shutdown) to every
//            actor, then a new pass from the newest common checkpoint step
//   end      exit(user_shutdown) to whatever is left
//
// c counts a message only from an actor of this pass, by its address: send
// as yourself (fail() uses send_as). An actor that ends before its final
// report (a down message) fails the run; one that never sends it stalls it.
//
// == Shared handlers (flow/role_handlers.hpp, failure.hpp; roles/) ===========
//
// Templates over a stateful actor whose state has `name`, `coordinator` and
// `work` (flow/activity.hpp: its heartbeats, heartbeats.hpp), and `finished` for
// stop_on_request.
//
//   (observe_atom, actor c) -> ok_atom   observe_coordinator: store c, monitor it
//                                        (quit when it is down), heartbeats go to it
//   (heartbeat_atom)                     answer_heartbeat: c <- a heartbeat now; none
//                                        from an actor busy in one computation
//   control{shutdown}                    stop_on_request (workers, shards): unless
//                                        finished, send what the run's end sends (as
//                                        things are now), then quit
//   (fault_atom, string kind)            chaos's throw, to a trainable actor: it fails
//                                        with "injected fault: kind"
//   sender_handlers (roles/sender_handlers.hpp), for a sender of microbatches:
//     (connect_atom, actor d, string name) -> ok_atom      d receives, behind a credit
//                                                          window of runtime.window slots
//     (fault_atom, string kind, string to, int64 value) -> ok_atom | bad_config
//                                        on the edge to `to`: "delay" value ms (every
//                                        message), "drop" the first training
//                                        microbatch of step value (injected_faults.hpp)
//     credit{microbatch_id, slots = 1}   a receiver freed the slot of that microbatch;
//                                        one for none in flight, or of other slots,
//                                        fails the actor
//     (heartbeat_atom)                   waiting for: the credits it is blocked on
//   after_step(n)                        a trainable actor's step n is done: its step
//                                        counter is n, its checkpoint written when due
//                                        (checkpointing.hpp), c <- step_atom (below)
//
//   What any actor tells c:
//     (heartbeat_atom, string actor, int64 step, int64 work, string waiting)
//                        at most once a second while it works (activity::add_busy),
//                        on request, and before a failure (guarded); step: its step
//                        counter (-1: none yet), work: pieces of work done
//     (failure_atom, string actor, uint8 code, string what)
//                        fail(): a fatal error, code its errc (compute_failed,
//                        bad_file, actor_failed: the run's error); then it quits
//     (step_atom, string actor, int64 step)
//                        after_step(step), from run.recovery.notify_from_step on
//                        (the plan's last trainable actor, when node faults or
//                        chaos count steps)
//     (fault_atom, string "dropped", string actor, int64 step)
//                        a sender's drop fault ate its microbatch of `step`
//     (trained_atom, string actor, int64 trained, int64 duplicates)
//                        before the final report of an actor that trains
//                        microbatches (training_counters.hpp: exactly-once counts)
//     (epoch_atom, actor_report)   one epoch (epochs = {it}) of a result-group member
//     (final_atom, actor_report)   its whole run; exactly once
//     tensor_set{"weights", from, replica, step}   its share of the final weights
//                        (plan `sends_weights`), before its final report
//     tensor_set{"epoch_weights", from, replica, step = epoch}
//                        the same after every epoch, with run.recovery.epoch_weights
//                        (--save-model with save: best; runtime/best_epochs.hpp): a
//                        head or pipeline stage at the epoch's end control, a
//                        data-parallel worker 0 or an IST shard at its epoch's end
//     progress{actor, epoch, samples, loss}        every runtime.progress_every steps,
//                        after an epoch's first and where its training ends
//                        (progress_pace.hpp)
//     control{start, 0, value = training samples of the run, text = actor}
//                        the progress line's total, when it starts (one per job)
//
// == source (roles/source.cpp; transfer and pipeline) ========================
//
//   accepts  sender_handlers; observe
//     (start_atom)       begin (once; ignored without a receiver): c <- control{start}
//     control{shutdown}  end the stream at the next training step boundary
//   sends    microbatch -> receivers: each epoch its training microbatches, then
//                        its evaluation ones (the test split's, then the validation
//                        samples', marked `validation`); dealt (flow/fanout.hpp): training to
//                        replica index_in_step % replicas, evaluation to replica 0
//            control{epoch_end, epoch, value = steps sent so far} -> every receiver
//            control{end_of_stream, epoch, steps} -> every receiver; c <- final report
//   restart  emits from step run.recovery.restore_step, with the ids of a full run
//
// == transfer ================================================================
//
//   stage (frozen layers; modes/transfer/stage.cpp)
//     accepts  sender_handlers (receivers: the next stage, or every head:
//              broadcast); observe
//       microbatch   queued; when every receiver has a slot: credit{id} to its
//                    sender, forward, the result to every receiver
//       control      queued and forwarded in order after the microbatches before
//                    it; after end_of_stream: c <- final report (no epoch reports)
//
//   head (modes/transfer/head.cpp; trainable, result group = its name)
//     accepts  observe; heartbeat ("microbatches from its stage"); chaos
//       microbatch   credit{id} to its sender at once; evaluate, or train (a replay
//                    of one already trained: dropped, a duplicate; one whose step
//                    lacks an earlier microbatch: fails; throw_at_step fires on a
//                    step's first); after a step's last: after_step, progress
//       control{epoch_end}      c <- (epoch_atom, report)
//       control{end_of_stream}  c <- trained_atom, then final report
//
// == pipeline (modes/pipeline/stage.cpp) ============================
//
//   pipeline_stage (trainable; replica r of its stage's group; the last
//   stage's replicas: result group "stage<i>")
//     accepts  sender_handlers (receivers: every replica of the next stage, in
//              order; none for the last stage); observe; chaos
//       (group_atom, actor peer, int32 r) -> ok_atom | bad_config   replica r
//       microbatch   from any upstream replica; credit{id} back to it when forwarded
//                    (or dropped as already trained); the last stage also takes
//                    the loss and its backward; throw_at_step fires on a step's first
//       control      queued once every upstream replica sent its copy, taken when
//                    the work before it is drained
//       gradient{microbatch_id, step, weight_version}   of a microbatch it forwarded
//       tensor_set{"gradients", from, replica, step, step_size}   a peer replica's
//                    gradient sum of one step (replicas step together, in order)
//       (drain_atom, int64 step, int32 size)   static 1f1b (an atom of the .cpp):
//                    the training before the next drain point ends with `step`
//     sends    microbatch, control -> receivers; gradient -> the microbatch's
//              sender (not from the first stage); tensor_set{"gradients"} -> each
//              peer, per step; drain_atom -> receivers and peers, once per drain
//              point (replica 0 sees it in its input, the others are told);
//              after_step after each of its steps; the last stage: progress and,
//              at epoch_end, its epoch report; every stage at end_of_stream:
//              trained_atom, weights (replica 0), final report (its trace under
//              --trace)
//
// == data-parallel (modes/data_parallel/) ====================================
//
//   data_parallel_worker (trainable; result group "workers"; reads its own
//   share of the data: no source, no credits)
//     accepts  observe; heartbeat (what it waits for); chaos; stop_on_request
//       (group_atom, actor peer, int32 i) -> ok_atom | bad_config
//                    ring: its successor, i = ring_next(w); exchange ps: shard i
//       (start_atom) fails without every peer; worker 0: c <- control{start}
//       tensor_set{"ring", from, replica = the predecessor, step,
//                  step_size = the ring round, {chunk}}   kept, applied in round
//                    order (ring_exchange.hpp), of this step or a later one
//       tensor_set{"ps_pull", from, replica = shard, step, {slice}}   exchange ps
//       a pair in one process (W = 2, synchronous SGD; worker.cpp share_weights,
//       one set of weights taken when the successor is given):
//       tensor_set{"gradients", from, replica = the other, step, {gradient per
//                  parameter}}   the other's of this step
//       tensor_set{"stepped", from, replica = the other, step, {}}   the other
//                  stepped its half of step; the next step waits for it
//     a step s   begins: after_step(s) (checkpoint when due, step_atom), throw
//                fault; forward and backward of its minibatch, then
//                ring: each gradient bucket's 2 (W - 1) rounds to the successor,
//                  tensor_set{"ring"} as above (with overlap, during the
//                  backward); the sum / W, one SGD step. Local SGD (sync_every L):
//                  its own step; the weights go round after every L steps and
//                  at every epoch end, averaged
//                a pair in one process: tensor_set{"gradients"} to the other,
//                  then half of every parameter stepped with the two
//                  gradients' mean, tensor_set{"stepped"} to the other
//                ps: tensor_set{"ps_push", name, replica = w, step, {slice}} to
//                  every busy shard; steps on while at most max_staleness ahead
//                  of the pulled steps; an epoch ends with every step pulled
//     epoch end  worker 0 evaluates; every worker: c <- (epoch_atom, report)
//     run end    c <- trained_atom, weights (worker 0), final report
//     also       c <- progress (worker 0)
//
//   data_parallel_shard (exchange: ps; trainable; owns a slice of the flat
//   parameters, ps_exchange.hpp)
//     accepts  observe; heartbeat ("the workers' pushes"); chaos; stop_on_request
//       (group_atom, actor worker, int32 w) -> ok_atom | bad_config
//       (start_atom) fails without every worker; an idle shard (all frozen) or a
//                    run without steps writes its checkpoints and reports at once
//       tensor_set{"ps_push", from, replica = w, step k, {gradient slice}}
//                    all W of step k: summed in worker order, / W, one SGD step
//                    (throw_at_step fires on that step's first push)
//     sends    tensor_set{"ps_pull", name, replica = shard, step k, {new slice}}
//              -> every worker, then after_step(k + 1); after the run's last
//              step, its final report (no trained count, weights or epochs)
//
// == ist (modes/ist/worker.hpp, ist/shard.hpp, subnet_scheme.hpp) ========
//
// One worker and one shard protocol for either subnet scheme; <kind> is the
// scheme's: "ist" (neuron_scheme: the mlp's hidden neurons) or "resist"
// (block_scheme: resnet18's residual blocks). Roles <kind>_worker and
// <kind>_shard; tensor_set kinds <kind>_subnet, <kind>_trained,
// <kind>_owned. The job's step is the round; every actor computes a round's
// subnets from seed and round (no partition messages).
//
//   <kind>_worker (trainable; result group "workers")
//     accepts  observe; heartbeat ("the shards' tensors of round r"); chaos;
//              stop_on_request
//       (group_atom, actor shard, int32 s) -> ok_atom | bad_config
//       (start_atom) fails without every shard; worker 0: c <- control{start}
//       tensor_set{"<kind>_subnet", from, replica = s, step = round r, {pieces}}
//                    kept by round (r or later, once per shard)
//       tensor_set{"<kind>_owned", from, replica = s, step = epoch, {owned}}
//                    worker 0 only: evaluates once every shard's came
//     a round    all S subnets there: throw fault; L local SGD steps; to each
//                shard tensor_set{"<kind>_trained", name, replica = w, step = r,
//                step_size = rounds per epoch, {its pieces}}; after_step(r + 1),
//                but after an epoch's last round only once the epoch is reported,
//                and none after the run's last
//     epoch end  (worker 0 after its evaluation) c <- (epoch_atom, report)
//     run end    c <- trained_atom, final report (worker 0: the network's digest)
//     also       c <- progress (worker 0)
//
//   <kind>_shard (trainable; sends the final weights)
//     accepts  observe; heartbeat ("the workers' tensors of round r"); chaos;
//              stop_on_request
//       (group_atom, actor worker, int32 w) -> ok_atom | bad_config
//       (start_atom) fails without every worker; begins round restore_step
//       tensor_set{"<kind>_trained", from, replica = w, step = this round,
//                  step_size = rounds per epoch (the same from all)}   once per
//                    worker; throw_at_step fires on that round's first
//     sends    each round: tensor_set{"<kind>_subnet", name, replica = shard,
//              step = r, {pieces}} -> every worker; all W back: after_step(r + 1);
//              an epoch's last round: tensor_set{"<kind>_owned",
//              step = epoch} -> worker 0; the run's last: c <- weights (its owned
//              tensors, step = rounds), final report
//
//   What differs between the schemes is what the tensors hold:
//     ist      pieces: shard s's 1/S of worker w's subnet neurons; the worker
//              concatenates them and cuts them back; the shard writes each back
//              in place as it comes. owned: its pieces of the whole network
//     resist   pieces: the state tensors of shard s's range (params, buffers) of
//              the layers w runs this round (the whole range in the first round
//              after a (re)start); the worker copies them into its network; the
//              shard averages them per tensor over the workers that ran it once
//              all W are back. owned: its range
//
// == The node (runtime/spawner.hpp, node_watch.hpp, net/tls.hpp) =============
//
//   spawner (one per node process; not a role)
//     spawn_request                     -> caf::actor | error   start a role of the
//                                          node's table (unknown_actor_type, bad_config,
//                                          bad_file); linked: it ends with the node
//     (get_atom, node_atom)             -> node_report          resources and usage
//     (get_atom, pulse_atom)            -> caf::actor           its pulse actor
//     (connect_atom, string host, uint16 port) -> ok_atom | node_unreachable
//                                          a direct connection to a peer node
//     (fault_atom, string kind, int32 ms) -> unit | error       "kill": SIGKILL its
//                                          process; "stop": SIGSTOP it for ms
//     (auth_atom, string nonce)         -> (nonce, PEM, signature)   TLS identity
//     (auth_atom, string PEM, string signature) -> ok_atom           proof; with TLS
//                                          it serves nothing else before it
//   pulse  (pulse_atom) -> (pulse_atom) to the sender, at once
//          (pulse_atom, tensor_set) -> (pulse_atom) to the sender once decoded
//          (baton predict's runtime calibration)
//
// == The coordinator (runtime/coordinator.cpp, job_nodes.cpp, node_watch.cpp) =
//
//   sends actors: the pass above; during training
//     (heartbeat_atom)        to every unfinished actor when no actor advanced
//                             for runtime.stall_timeout_ms; it waits 1 s for the
//                             answers before it reports a stall
//     control{shutdown, epoch, 0, "stop_at_accuracy"}   every head reached
//                             runtime.stop_at_accuracy: to the actors the plan
//                             starts (a source ends its stream, workers and
//                             shards finish at once); unreported after the stall
//                             timeout: left out
//     control{shutdown, 0, 0, "node_lost"}   a lost node it cannot recover
//                             from: the same, to keep the work done
//     (fault_atom, "throw (chaos)")          to a trainable actor (chaos)
//   sends spawners: spawn_request; (get_atom, node_atom) at connect and at the
//     end; (get_atom, pulse_atom); (connect_atom, host, port) for each node
//     pair (no TLS); (fault_atom, "kill"|"stop", ms) for a node fault, sent,
//     not requested
//   node watch: (pulse_atom) to each node's pulse every runtime.heartbeat_ms
//     (at most a quarter of connection_timeout_ms); c <- (late_atom, node,
//     int64 silent_ms) while one is silent (the last when it counts as lost),
//     (back_atom, node, int64 silent_ms) when a late one answers
//   receives: everything "What any actor tells c" lists, down messages, and
//     the watch's late and back

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
