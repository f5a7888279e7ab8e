#include "apps/args.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <optional>
#include <regex>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/config/yaml_field.hpp"
#include "actors/runtime/emulated_hosts.hpp"
#include "messages/errc.hpp"

namespace baton::apps {

namespace {

/// The flags set_known_flags found.
std::vector<std::string>& known_flags() {
  static std::vector<std::string> flags;
  return flags;
}

} // namespace

int exit_code_of(const caf::error& err) {
  if (err.category() != error_category_atom)
    return 1;
  switch (static_cast<errc>(err.code())) {
    case errc::bad_config:
    case errc::bad_file:
    case errc::node_unreachable:
    case errc::unknown_actor_type:
      return 2;
    case errc::interrupted:
      return 130;
    default:
      return 1;
  }
}

int fail(const caf::error& err) {
  spdlog::error("{}", describe(err));
  return exit_code_of(err);
}

bool parse_int(const std::string& flag, const std::string& text, int32_t& out) {
  try {
    size_t used = 0;
    out = std::stoi(text, &used);
    if (used == text.size() && out >= 0)
      return true;
  } catch (const std::exception&) {
  }
  std::fprintf(stderr, "baton: %s expects a non-negative integer, got '%s'\n", flag.c_str(),
               text.c_str());
  return false;
}

bool parse_in_range(const std::string& flag, const std::string& text, int32_t min, int32_t max,
                    int32_t& out) {
  try {
    size_t used = 0;
    long long n = std::stoll(text, &used);
    if (used == text.size() && n >= min && n <= max) {
      out = static_cast<int32_t>(n);
      return true;
    }
  } catch (const std::exception&) {
  }
  std::fprintf(stderr, "baton: %s expects an integer from %d to %d, got '%s'\n", flag.c_str(),
               min, max, text.c_str());
  return false;
}

bool parse_port(const std::string& flag, const std::string& text, uint16_t& out) {
  int32_t n = 0;
  if (parse_int(flag, text, n) && n <= 65535) {
    out = static_cast<uint16_t>(n);
    return true;
  }
  if (n > 65535)
    std::fprintf(stderr, "baton: %s expects a port from 0 (any) to 65535, got '%s'\n",
                 flag.c_str(), text.c_str());
  return false;
}

namespace {

/// `text` as a finite number, nothing after it; nullopt otherwise (stod
/// takes "inf", "nan" and throws on "1e999").
std::optional<double> finite_number(const std::string& text) {
  try {
    size_t used = 0;
    double x = std::stod(text, &used);
    if (used == text.size() && std::isfinite(x))
      return x;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

} // namespace

bool parse_positive(const std::string& flag, const std::string& text, double& out) {
  auto x = finite_number(text);
  if (x && *x > 0) {
    out = *x;
    return true;
  }
  std::fprintf(stderr, "baton: %s expects a positive number, got '%s'\n", flag.c_str(),
               text.c_str());
  return false;
}

bool parse_number_in(const std::string& flag, const std::string& text, double min, double max,
                     const std::string& expected, double& out) {
  auto x = finite_number(text);
  if (x && *x >= min && *x <= max) {
    out = *x;
    return true;
  }
  std::fprintf(stderr, "baton: %s expects %s, got '%s'\n", flag.c_str(), expected.c_str(),
               text.c_str());
  return false;
}

bool parse_latency(const std::string& flag, const std::string& text, double& out) {
  return parse_number_in(flag, text, 0, 10,
                         "a latency in seconds from 0 to 10 (0.0001 for 100 us)", out);
}

bool parse_link(const std::string& flag, const std::string& text, std::string& out) {
  std::string error;
  if (!actors::parse_link_spec(text, error)) {
    std::fprintf(stderr, "baton: %s %s\n", flag.c_str(), error.c_str());
    return false;
  }
  out = text;
  return true;
}

bool parse_bandwidth(const std::string& flag, const std::string& text,
                     double& bytes_per_second) {
  // Anything but a number's characters is a unit: "1gbit" is a rate, "1e9" bytes/s.
  if (text.find_first_not_of("0123456789.eE+-") == std::string::npos)
    return parse_number_in(flag, text, 125, 12.5e9,
                           "a number of bytes per second from 125 to 12.5e9 (1kbit to 100gbit), "
                           "or a rate as --link takes it (1gbit)",
                           bytes_per_second);
  std::string error;
  auto spec = text.find(',') == std::string::npos ? actors::parse_link_spec(text, error)
                                                  : std::nullopt;
  if (!spec) {
    std::fprintf(stderr,
                 "baton: %s expects a rate as --link takes it (1gbit, 100mbit: bits per second) "
                 "or a number of bytes per second (1e9), got '%s'\n",
                 flag.c_str(), text.c_str());
    return false;
  }
  bytes_per_second = static_cast<double>(spec->rate_bits) / 8;
  return true;
}

void set_known_flags(const std::string& text) {
  static const std::regex flag{"--[a-z][a-z0-9-]*"};
  auto& flags = known_flags();
  for (auto it = std::sregex_iterator(text.begin(), text.end(), flag);
       it != std::sregex_iterator(); ++it)
    if (std::find(flags.begin(), flags.end(), it->str()) == flags.end())
      flags.push_back(it->str());
}

std::string hint_among(const std::string& typed, const std::vector<std::string>& known) {
  auto suggestion = actors::did_you_mean(typed, known);
  return suggestion.empty() ? suggestion : " (" + suggestion + ")";
}

std::string flag_hint(const std::string& flag) {
  return hint_among(flag, known_flags());
}

} // namespace baton::apps
