#include "apps/args.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <optional>
#include <regex>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/config/yaml_field.hpp"
#include "actors/runtime/emulated_hosts.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"

namespace baton::apps {

namespace {

/// The flags set_known_flags found.
std::vector<std::string>& known_flags() {
  static std::vector<std::string> flags;
  return flags;
}

int& flag_errors() {
  static int count = 0;
  return count;
}

/// Whether `text` starts or ends with white space (stoi and stod skip the
/// leading one: `--port ' 80'` was taken as 80).
bool padded(const std::string& text) {
  return !text.empty() && (std::isspace(static_cast<unsigned char>(text.front())) != 0 ||
                           std::isspace(static_cast<unsigned char>(text.back())) != 0);
}

} // namespace

void report_flag_error(const std::string& text) {
  ++flag_errors();
  std::fprintf(stderr, "baton: %s\n", text.c_str());
}

int flag_errors_reported() {
  return flag_errors();
}

bool args::repeatable(const std::string& flag) {
  return flag == "--set" || flag == "--fault" || flag == "--side" || flag == "--tls-allow";
}

bool args::value(const std::string& flag, std::string& out) {
  if (done()) {
    report_flag_error(flag + " needs a value");
    return false;
  }
  if (!repeatable(flag) && std::find(given.begin(), given.end(), flag) != given.end()) {
    report_flag_error(flag + " is given twice: give it once (only --set, --fault, --side and "
                             "--tls-allow may repeat)");
    return false;
  }
  given.push_back(flag);
  out = take();
  if (out.empty()) {
    report_flag_error(flag + " needs a value, got an empty one (leave the flag out for its "
                             "default)");
    return false;
  }
  return true;
}

void report_refused_flag(const char* command, const std::string& flag, const std::string* value) {
  if (value != nullptr)
    std::fprintf(stderr, "%s: bad value '%s' for %s (see baton help)\n", command, value->c_str(),
                 flag.c_str());
  else
    std::fprintf(stderr, "%s: bad argument '%s'%s (see baton help)\n", command, flag.c_str(),
                 flag_hint(flag).c_str());
}

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

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out;
}

int fail(const caf::error& err) {
  spdlog::error("{}", printable(describe(err)));
  return exit_code_of(err);
}

bool parse_int(const std::string& flag, const std::string& text, int32_t& out) {
  try {
    size_t used = 0;
    out = std::stoi(text, &used);
    if (used == text.size() && out >= 0 && !padded(text))
      return true;
  } catch (const std::exception&) {
  }
  report_flag_error(fmt::format("{} expects a non-negative integer, got '{}'", flag, text));
  return false;
}

bool parse_in_range(const std::string& flag, const std::string& text, int32_t min, int32_t max,
                    int32_t& out) {
  try {
    size_t used = 0;
    long long n = std::stoll(text, &used);
    if (used == text.size() && n >= min && n <= max && !padded(text)) {
      out = static_cast<int32_t>(n);
      return true;
    }
  } catch (const std::exception&) {
  }
  report_flag_error(
    fmt::format("{} expects an integer from {} to {}, got '{}'", flag, min, max, text));
  return false;
}

bool parse_port(const std::string& flag, const std::string& text, uint16_t& out) {
  int32_t n = 0;
  if (parse_int(flag, text, n) && n <= 65535) {
    out = static_cast<uint16_t>(n);
    return true;
  }
  if (n > 65535)
    report_flag_error(
      fmt::format("{} expects a port from 0 (any) to 65535, got '{}'", flag, text));
  return false;
}

namespace {

/// `text` as a finite number, nothing after it; nullopt otherwise (stod
/// takes "inf", "nan" and throws on "1e999").
std::optional<double> finite_number(const std::string& text) {
  try {
    size_t used = 0;
    double x = std::stod(text, &used);
    if (used == text.size() && std::isfinite(x) && !padded(text))
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
  report_flag_error(fmt::format("{} expects a positive number, got '{}'", flag, text));
  return false;
}

bool parse_number_in(const std::string& flag, const std::string& text, double min, double max,
                     const std::string& expected, double& out) {
  auto x = finite_number(text);
  if (x && *x >= min && *x <= max) {
    out = *x;
    return true;
  }
  report_flag_error(fmt::format("{} expects {}, got '{}'", flag, expected, text));
  return false;
}

bool parse_latency(const std::string& flag, const std::string& text, double& out) {
  return parse_number_in(flag, text, 0, 10,
                         "a latency in seconds from 0 to 10 (0.0001 for 100 us)", out);
}

bool parse_link(const std::string& flag, const std::string& text, std::string& out) {
  std::string error;
  if (!actors::parse_link_spec(text, error)) {
    report_flag_error(flag + " " + error);
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
    report_flag_error(fmt::format("{} expects a rate as --link takes it (1gbit, 100mbit: bits "
                                  "per second) or a number of bytes per second (1e9), got '{}'",
                                  flag, text));
    return false;
  }
  bytes_per_second = static_cast<double>(spec->rate_bits) / 8;
  return true;
}

bool writable_output(const std::string& flag, const std::string& path) {
  if (auto why = model::try_check_writable(path); !why.empty()) {
    report_flag_error(flag + ": " + why);
    return false;
  }
  return true;
}

bool not_an_input(const char* command, const std::string& out_flag, const std::string& out,
                  const std::vector<std::pair<std::string, std::string>>& inputs) {
  for (const auto& [flag, input] : inputs) {
    if (!out.empty() && !input.empty() && model::same_file(out, input)) {
      std::fprintf(stderr, "%s: %s '%s' is an input of this command (%s): name another file\n",
                   command, out_flag.c_str(), out.c_str(), flag.c_str());
      return false;
    }
  }
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
  const auto& known = known_flags();
  if (std::find(known.begin(), known.end(), flag) != known.end())
    return {};
  return hint_among(flag, known);
}

} // namespace baton::apps
