#include "tests/support/node_process.hpp"

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "messages/errc.hpp"

namespace baton::testing {

node_process::node_process(const std::string& dir, const std::string& name,
                           const std::vector<std::string>& args,
                           const std::vector<std::string>& launcher) {
  static std::atomic<int> started{0};
  auto stem = dir + "/" + name + "-" + std::to_string(++started);
  log_path_ = stem + ".log";
  auto port_file = stem + ".port";
  std::vector<std::string> argv = launcher;
  argv.insert(argv.end(), {BATON_BINARY, "node"});
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--name", name, "--port", "0", "--port-file", port_file});
  auto child = actors::child_process::start(argv, log_path_);
  if (!child) {
    start_error_ = "cannot start node " + name + ": " + describe(child.error()) + "\n";
    return;
  }
  child_ = std::move(*child);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (port_ == 0 && child_.running() && std::chrono::steady_clock::now() < deadline) {
    std::ifstream in{port_file};
    if (!(in >> port_))
      port_ = 0;
    if (port_ == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string node_process::log() const {
  std::ifstream in{log_path_};
  return start_error_ + std::string{std::istreambuf_iterator<char>{in}, {}};
}

} // namespace baton::testing
