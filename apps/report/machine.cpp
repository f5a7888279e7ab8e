#include "apps/report/machine.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "apps/version.hpp"

namespace baton::apps {

namespace {

/// The first "model name" of /proc/cpuinfo ("unknown CPU" elsewhere).
std::string cpu_model() {
  std::ifstream in{"/proc/cpuinfo"};
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0)
      if (auto colon = line.find(':'); colon != std::string::npos)
        return line.substr(line.find_first_not_of(' ', colon + 1));
  return "unknown CPU";
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0)
    return "unknown";
  return name;
}

std::string os_name() {
  struct utsname u {};
  if (::uname(&u) != 0)
    return "unknown";
  return std::string{u.sysname} + " " + u.release + " " + u.machine;
}

} // namespace

nlohmann::json this_machine() {
  auto pages = ::sysconf(_SC_PHYS_PAGES);
  auto page = ::sysconf(_SC_PAGESIZE);
  return {{"hostname", hostname()},
          {"cpu", cpu_model()},
          {"cores", ::sysconf(_SC_NPROCESSORS_ONLN)},
          {"memory_bytes", pages > 0 && page > 0 ? static_cast<double>(pages) * page : 0.0},
          {"os", os_name()},
          {"baton", version_text}};
}

} // namespace baton::apps
