#include "model/core/log_once.hpp"

#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

namespace baton::model {

void log_once(const std::string& text) {
  static std::mutex mutex;
  static std::set<std::string> logged;
  std::lock_guard<std::mutex> lock{mutex};
  if (logged.insert(text).second)
    spdlog::info("{}", text);
}

} // namespace baton::model
