#include "tests/support/python_torch.hpp"

#include <fstream>

namespace baton::testing {

const std::string& python_with_torch() {
  static const std::string python = [] {
    for (const char* candidate : {"python3", "/usr/bin/python3"})
      if (run_shell(std::string(candidate) + " -c 'import torch' 2>&1").exit_code == 0)
        return std::string(candidate);
    return std::string();
  }();
  return python;
}

command_output run_python(const std::string& dir, const std::string& name,
                          const std::string& script, const std::vector<std::string>& args) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << script;
  std::string command = python_with_torch() + " " + quote(path);
  for (const auto& arg : args)
    command += " " + quote(arg);
  return run_shell(command + " </dev/null 2>&1");
}

} // namespace baton::testing
