#pragma once

// How an epoch's samples are cut into minibatches and microbatches: the one
// plan that the actor source, every mode's `--mode local` reference and
// pre-training all follow. Free of LibTorch.

#include <cstdint>
#include <string>
#include <vector>

#include "model/core/specs.hpp"

namespace baton::model {

/// Derives a per-actor seed from the run seed and a name (FNV-1a mix), so a
/// head's initial weights do not depend on how many other heads there are.
/// Arithmetic on the seed, defined here: the topology reader derives its
/// seeds without a call into the model's files.
inline uint64_t derive_seed(uint64_t base, const std::string& name) {
  // FNV-1a over the name's bytes, started from the base seed's bytes, then a
  // SplitMix64 finaliser so that similar names give unrelated seeds.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int i = 0; i < 8; ++i) {
    h ^= (base >> (8 * i)) & 0xff;
    h *= 0x100000001b3ULL;
  }
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

/// Throws model::error unless batch_size > 0, microbatches > 0 and epochs >= 0.
void check_plan(const batch_plan& plan);

/// The microbatches of one training epoch: each entry is a list of sample
/// ids; minibatch k is entries [k*m, (k+1)*m). A last partial minibatch is
/// kept (cut into as many microbatches as it can fill, at least one).
struct epoch_plan {
  std::vector<std::vector<int64_t>> microbatches;
  std::vector<int32_t> step_of;      ///< minibatch index (within the epoch) per microbatch
  std::vector<int32_t> step_size_of; ///< microbatches in that minibatch
  int32_t epoch = 0;                 ///< the epoch it plans
};
epoch_plan plan_epoch(int64_t dataset_size, const batch_plan& plan, int32_t epoch);

/// How many minibatches (optimizer steps of a flush schedule) and
/// microbatches (steps of an unreplicated 1f1b stage) plan_epoch cuts an
/// epoch of `dataset_size` samples into: the same in every epoch, counted
/// without the samples. Throws model::error as check_plan.
struct epoch_counts {
  int64_t minibatches = 0;
  int64_t microbatches = 0;
};
epoch_counts count_epoch(int64_t dataset_size, const batch_plan& plan);

/// The test split in order, cut into batches of `batch_size`.
std::vector<std::vector<int64_t>> plan_eval(int64_t dataset_size, int64_t batch_size);

} // namespace baton::model
