# The wire format of baton: everything that crosses a process boundary.
#
# Every message is an Envelope. `version` is messages::schema_version of the
# writer; a reader refuses any other version (unknown_schema_version), so a
# change that an older reader cannot ignore must bump it. Adding fields or
# union members at the end stays readable by older builds (Cap'n Proto
# evolution rules) but still needs a version bump if they carry meaning that
# must not be dropped.
#
# Tensors are raw bytes in the byte order of the writer (little-endian: every
# supported host), row-major, with the element type and the shape alongside.
#
# Version history:
#   1  the first release.
#   2  TensorSet (replica gradients and weights) and ActorReport's
#      bubbleSeconds and trace: a version-1 reader would drop the trace and
#      the bubble time without a word, and could not read a TensorSet at all.
#   3  Microbatch's samples (the data set's sample ids, which a frozen
#      stage's feature cache is keyed by) and ActorReport's figures and
#      events: a version-2 reader would drop the ids, and a cache could not
#      tell which samples it holds.
#   4  Tensor's sharedOffset (a tensor in shared memory may start anywhere in
#      its file: a view of a gradient bucket that was written there): a
#      version-3 reader would read the wrong bytes.

@0xa65fcc7ffb637ae2;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("baton::messages::wire");

# -- tensors -------------------------------------------------------------------

enum DType {
  float32 @0;
  float64 @1;
  int64 @2;
  int32 @3;
  uint8 @4;
  int8 @5;
  float16 @6;
  bfloat16 @7;
  bool @8;
  int16 @9;
}

struct Tensor {
  dtype @0 :DType;
  shape @1 :List(Int64);  # sizes, outermost first; empty list: a scalar
  data @2 :Data;          # product(shape) * element size bytes, row-major
  shared @3 :Text;        # or, with no data: the /dev/shm file holding them
                          # (node processes of one host, messages/shared_memory.hpp)
  sharedOffset @4 :UInt64; # where in that file's data they start
}

# -- training traffic ----------------------------------------------------------

struct TaskLabels {
  task @0 :Text;
  values @1 :Tensor;
}

struct Microbatch {
  id @0 :Int64;
  step @1 :Int64;
  epoch @2 :Int32;
  indexInStep @3 :Int32;
  stepSize @4 :Int32;
  eval @5 :Bool;
  weightVersion @6 :Int64;
  payload @7 :Tensor;     # absent: an undefined tensor
  labels @8 :List(TaskLabels);
  # The sample id of every payload row; empty: not known. A reader refuses
  # a list whose length is not the payload's rows, or a negative id.
  samples @9 :List(Int64);
  # With eval: the validation samples (data.validation), not the test split;
  # their sample ids count on from the test split's.
  validation @10 :Bool;
  # The input of the previous stage's last layer, whose weight gradient the
  # receiver computes (weight_gradient: next); absent otherwise.
  boundaryInput @11 :Tensor;
}

struct Gradient {
  microbatchId @0 :Int64;
  step @1 :Int64;
  weightVersion @2 :Int64;
  value @3 :Tensor;       # absent: an undefined tensor
  # The weight gradients of the receiver's last layer (weight, then bias),
  # computed by the sender (weight_gradient: next) and sent after the
  # microbatch's gradient, in a message of their own without a value;
  # empty otherwise.
  weightGradients @4 :List(OptionalTensor);
}

# One entry of a TensorSet; a list of Tensor could not say "undefined".
struct OptionalTensor {
  value @0 :Tensor;       # absent: an undefined tensor (a parameter without gradient)
}

struct TensorSet {
  kind @0 :Text;          # "gradients" | "weights"
  from @1 :Text;
  replica @2 :Int32;
  step @3 :Int64;
  stepSize @4 :Int32;
  tensors @5 :List(OptionalTensor);
}

struct Credit {
  microbatchId @0 :Int64;
  slots @1 :Int32;
}

enum ControlKind {
  start @0;
  epochEnd @1;
  endOfStream @2;
  shutdown @3;
}

struct Control {
  kind @0 :ControlKind;
  epoch @1 :Int32;
  value @2 :Int64;
  text @3 :Text;
}

# -- reports and node management -----------------------------------------------

struct EdgeStats {
  from @0 :Text;
  to @1 :Text;
  messages @2 :Int64;
  bytes @3 :Int64;
}

struct EpochResult {
  epoch @0 :Int32;
  trainLoss @1 :Float64;
  testAccuracy @2 :Float64;
  samples @3 :Int64;
  validationAccuracy @4 :Float64 = -1;  # -1: no validation samples
  evaluated @5 :Int64;    # test samples testAccuracy covers (0: not counted)
  validated @6 :Int64;    # validation samples validationAccuracy covers
}

struct TraceEvent {
  kind @0 :Text;
  startUs @1 :Int64;      # microseconds since the Unix epoch
  durationUs @2 :Int64;
  microbatchId @3 :Int64;
  weightVersion @4 :Int64;
}

struct ActorReport {
  actor @0 :Text;
  role @1 :Text;
  task @2 :Text;
  node @3 :Text;
  busySeconds @4 :Float64;
  idleSeconds @5 :Float64;
  samples @6 :Int64;
  trainLoss @7 :Float64;
  testAccuracy @8 :Float64;
  weightsDigest @9 :Text;
  edges @10 :List(EdgeStats);
  epochs @11 :List(EpochResult);
  bubbleSeconds @12 :Float64;
  trace @13 :List(TraceEvent);
  # CPU seconds of the actor's thread inside its computations, and of its
  # whole process since its first piece of work (0 from actors that do not
  # measure them; an older reader drops only these figures).
  computeCpuSeconds @14 :Float64;
  processCpuSeconds @15 :Float64;
  # Role-specific figures and events (JSON objects): a worker's time split,
  # a cache's counts, freezing decisions. An older reader drops them only.
  figures @16 :List(NamedFigure);
  events @17 :List(Text);
}

struct NamedFigure {
  name @0 :Text;
  value @1 :Float64;
}

struct NodeReport {
  name @0 :Text;
  peakRssBytes @1 :Int64;
  cpuSeconds @2 :Float64;
  cores @3 :Int32;
  memoryBytes @4 :Int64;
}

struct SpawnRequest {
  role @0 :Text;
  name @1 :Text;
  spec @2 :Text;
}

struct Progress {
  actor @0 :Text;
  epoch @1 :Int32;
  samples @2 :Int64;
  loss @3 :Float64;
}

# Sent in place of a message that its sender could not encode (too large,
# unsupported tensor) or that was already invalid when it was sent: the
# receiver gets the struct with `invalid` set instead of nothing at all.
struct Refusal {
  code @0 :UInt8;         # a baton::errc value
  text @1 :Text;          # what went wrong, for humans
}

# -- the envelope --------------------------------------------------------------

struct Envelope {
  version @0 :UInt32;
  body :union {
    microbatch @1 :Microbatch;
    gradient @2 :Gradient;
    credit @3 :Credit;
    control @4 :Control;
    actorReport @5 :ActorReport;
    nodeReport @6 :NodeReport;
    spawnRequest @7 :SpawnRequest;
    progress @8 :Progress;
    refused @9 :Refusal;
    tensorSet @10 :TensorSet;
  }
}
