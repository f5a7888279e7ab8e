#include "tests/support/jobs.hpp"

#include "tests/support/commands.hpp"

namespace baton::testing {

std::vector<std::string> short_pipeline_job(int epochs) {
  return {"run",   source_path("configs/pipeline.yaml"),
          "--set", "data.train_limit=1024",
          "--set", "data.test_limit=256",
          "--set", "data.microbatches=2",
          "--set", "data.epochs=" + std::to_string(epochs),
          "--set", "pipeline.schedule=gpipe",
          "--set", "runtime.checkpoint_every=4"};
}

std::vector<std::string> short_transfer_job(int samples) {
  return {"run",   source_path("configs/transfer.yaml"),
          "--set", "backbone.checkpoint=none",
          "--set", "data.train_limit=" + std::to_string(samples),
          "--set", "data.test_limit=128"};
}

std::vector<std::string> transfer_job_on(const std::string& name, uint16_t port) {
  return {"run",   source_path("configs/transfer.yaml"),
          "--set", "backbone.checkpoint=none",
          "--set", "data.train_limit=256",
          "--set", "data.test_limit=64",
          "--set", "nodes=[{name: " + name + ", host: 127.0.0.1, port: " +
                     std::to_string(port) + "}]"};
}

} // namespace baton::testing
