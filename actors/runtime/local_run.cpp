#include "actors/runtime/local_run.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/roles/source.hpp"
#include "actors/runtime/spawner.hpp"

namespace baton::actors {
inline namespace runtime {

int32_t cores() {
  return std::max(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
}

caf::expected<std::pair<model::dataset, model::dataset>> load_data(const topology& t,
                                                                   int64_t train_limit) {
  auto spec = make_source_spec(t);
  spec.data.train_limit = train_limit;
  return load_source_data(spec);
}

model::progress_fn log_progress(const std::string& what) {
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  return [what, last](const std::string& name, int32_t epoch, int64_t samples, double loss) {
    auto now = std::chrono::steady_clock::now();
    if (now - *last < std::chrono::seconds(5))
      return;
    *last = now;
    spdlog::info("{} {}: epoch {} {} samples, loss {:.4f}", what, name, epoch + 1, samples, loss);
  };
}

job_result local_result(const topology& t, const std::string& node,
                        std::chrono::steady_clock::time_point started,
                        std::chrono::steady_clock::time_point training_started) {
  auto ended = std::chrono::steady_clock::now();
  job_result out;
  out.job = t.job;
  out.run = "local";
  out.nodes.push_back(current_node_report(node));
  out.wall_seconds = std::chrono::duration<double>(ended - started).count();
  out.train_seconds = std::chrono::duration<double>(ended - training_started).count();
  return out;
}

} // namespace runtime
} // namespace baton::actors
