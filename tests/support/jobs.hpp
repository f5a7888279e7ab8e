#pragma once

// The shipped configs made short: the `baton run` arguments of the jobs
// that several end-to-end suites train, fault and stop.

#include <cstdint>
#include <string>
#include <vector>

namespace baton::testing {

/// configs/pipeline.yaml as a short gpipe pipeline: 1024 samples (256 to
/// test) in minibatches of 2 x 32, 16 steps per epoch, `epochs` epochs, a
/// checkpoint every 4 steps.
std::vector<std::string> short_pipeline_job(int epochs = 2);

/// configs/transfer.yaml (three heads on the frozen backbone, at its initial
/// weights: no suite waits for the 20,000-sample pre-training) on `samples`
/// training samples and 128 test samples.
std::vector<std::string> short_transfer_job(int samples = 512);

/// configs/transfer.yaml from initial backbone weights (no checkpoint) on
/// 256 training samples (64 to test), over the one node `name` at
/// 127.0.0.1:`port`.
std::vector<std::string> transfer_job_on(const std::string& name, uint16_t port);

} // namespace baton::testing
