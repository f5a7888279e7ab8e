#include "tests/support/text.hpp"

#include <fstream>
#include <iterator>

namespace baton::testing {

std::string read_text(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, {}};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace baton::testing
