#include "model/data_parallel/worker_lanes.hpp"

#include <ATen/Parallel.h>

namespace baton::model {

worker_lanes::worker_lanes(size_t lanes, int32_t torch_threads)
    : torch_threads_(torch_threads), caller_threads_(at::get_num_threads()) {
  // Once for the run: ATen resizes its thread pool on every change of the
  // count, which cost more than a small step when it was done per call.
  at::set_num_threads(torch_threads_);
  for (size_t lane = 1; lane < lanes; ++lane)
    threads_.emplace_back([this, lane] { serve(lane); });
}

worker_lanes::~worker_lanes() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  started_.notify_all();
  for (auto& t : threads_)
    t.join();
  at::set_num_threads(caller_threads_);
}

void worker_lanes::run(size_t n, const std::function<void(size_t)>& job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    n_ = n;
    job_ = &job;
    errors_.assign(n, nullptr);
    running_ = threads_.size();
    ++generation_;
  }
  started_.notify_all();
  work(0);
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [this] { return running_ == 0; });
  job_ = nullptr;
  for (auto& e : errors_)
    if (e)
      std::rethrow_exception(e);
}

void worker_lanes::work(size_t lane) {
  for (size_t i = lane; i < n_; i += lanes()) {
    try {
      (*job_)(i);
    } catch (...) {
      errors_[i] = std::current_exception();
    }
  }
}

void worker_lanes::serve(size_t lane) {
  // This thread's own budget (OpenMP's is per thread). ATen sets a thread's
  // from a process-wide value on its first parallel call: that comes first.
  at::get_num_threads();
  at::set_num_threads(torch_threads_);
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      started_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_)
        return;
      seen = generation_;
    }
    work(lane);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --running_;
    }
    finished_.notify_one();
  }
}

} // namespace baton::model
