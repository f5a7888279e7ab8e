#pragma once

// The data-parallel reference's workers computed side by side, as the actors
// compute them: each worker's forward and backward on its own thread with
// the actors' torch thread budget, so that its sums are theirs bit for bit
// (OpenBLAS adds in another order on more threads) and two workers on two
// cores take one step's time, not two.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace baton::model {

/// `lanes` threads for the life of a run (the caller is the first), each
/// computing on `torch_threads` intra-op threads: the caller's too, from
/// construction to destruction (its own count is restored then).
class worker_lanes {
public:
  worker_lanes(size_t lanes, int32_t torch_threads);
  ~worker_lanes();
  worker_lanes(const worker_lanes&) = delete;
  worker_lanes& operator=(const worker_lanes&) = delete;

  size_t lanes() const { return threads_.size() + 1; }

  /// Runs job(i) for every i in [0, n), lane k taking i = k, k + lanes, ...
  /// (the caller lane 0), and returns when all are done; rethrows the error
  /// of the lowest i that threw.
  void run(size_t n, const std::function<void(size_t)>& job);

private:
  void serve(size_t lane);
  void work(size_t lane);

  int32_t torch_threads_;
  int caller_threads_;
  std::mutex mutex_;
  std::condition_variable started_, finished_;
  uint64_t generation_ = 0;   ///< one per run()
  size_t running_ = 0;        ///< lanes still working on this generation
  bool stopping_ = false;
  size_t n_ = 0;
  const std::function<void(size_t)>* job_ = nullptr;
  std::vector<std::exception_ptr> errors_; ///< per job index
  std::vector<std::thread> threads_;
};

} // namespace baton::model
