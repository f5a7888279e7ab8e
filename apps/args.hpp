#pragma once

// The command line of `baton`: an argument cursor and the flag parsers every
// command shares; each prints its error to stderr ("baton: --x expects ...").

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <caf/error.hpp>

namespace baton::apps {

/// Prints "baton: TEXT" to stderr as the reason a flag was refused, and
/// counts it (read_flags then adds no line of its own).
void report_flag_error(const std::string& text);

/// How many report_flag_error printed so far.
int flag_errors_reported();

/// Argument cursor with "needs a value" errors.
struct args {
  std::vector<std::string> items;
  size_t next = 0;
  std::vector<std::string> given; ///< the flags value() read, in order
  bool done() const { return next >= items.size(); }
  std::string take() { return items[next++]; }
  /// The value of `flag` into `out`: refused when none follows, when it is
  /// empty (an empty path or list is not the flag left out) or when `flag`
  /// was given before (one would silently win) unless it repeats by design
  /// (repeatable).
  bool value(const std::string& flag, std::string& out);
  /// --set, --fault, --side and --tls-allow: each use adds one.
  static bool repeatable(const std::string& flag);
};

/// The exit code of a command that failed with `err`: 2 bad input, 130
/// interrupted, 1 otherwise (`baton help` lists them).
int exit_code_of(const caf::error& err);

/// `text` with its control characters (an escape sequence quoted from a
/// binary file given as a topology) as \xNN, line ends and tabs kept: an
/// error message never drives the terminal.
std::string printable(const std::string& text);

/// Logs `err` (printable) and returns its exit code.
int fail(const caf::error& err);

/// A non-negative integer.
bool parse_int(const std::string& flag, const std::string& text, int32_t& out);

/// An integer from `min` to `max`; any other value (not a number, negative,
/// out of range) gets the one error that states the range.
bool parse_in_range(const std::string& flag, const std::string& text, int32_t min, int32_t max,
                    int32_t& out);

/// A TCP port, 0 (any: chosen by the OS) to 65535.
bool parse_port(const std::string& flag, const std::string& text, uint16_t& out);

/// A positive finite number ("inf", "nan" and overflows such as "1e999" are
/// refused).
bool parse_positive(const std::string& flag, const std::string& text, double& out);

/// A finite number from `min` to `max`; any other value gets the one error
/// "FLAG expects EXPECTED, got 'TEXT'" (`expected` says the range and unit).
bool parse_number_in(const std::string& flag, const std::string& text, double min, double max,
                     const std::string& expected, double& out);

/// A link latency in seconds, 0 to 10 (as `--link`'s delay): the cost
/// model's `--latency` of `baton predict` and `baton compare`.
bool parse_latency(const std::string& flag, const std::string& text, double& out);

/// A `--link` value: RATE[,DELAY] (parse_link_spec); the error names the
/// flag and the expected form.
bool parse_link(const std::string& flag, const std::string& text, std::string& out);

/// A bandwidth in bytes per second: a RATE as `--link` takes it (`1gbit`,
/// `100mbit`, `2.5mbit`: bits per second, decimal) or, as before, a plain
/// positive number of bytes per second (`1e9`); either within `--link`'s
/// range, 1kbit to 100gbit (125 to 12.5e9 bytes/s).
bool parse_bandwidth(const std::string& flag, const std::string& text, double& bytes_per_second);

/// Whether the file `path` that FLAG names can be written (its directory
/// made, a file created there; model::try_check_writable), checked when
/// the flag is read: a bench or a plan found it out after its work.
bool writable_output(const std::string& flag, const std::string& path);

/// Whether `out`, a file a command writes, is none of `inputs` (the same
/// path, or the same file by another name): "COMMAND: OUT_FLAG 'F' is an
/// input of this command (INPUT_FLAG)" printed and false otherwise; an input
/// overwritten by an output is gone when the output is wrong.
bool not_an_input(const char* command, const std::string& out_flag, const std::string& out,
                  const std::vector<std::pair<std::string, std::string>>& inputs);

/// Records the flags `text` lists (every "--word" in it): main gives `baton
/// help`'s text, so that a mistyped flag is compared with every flag of baton.
void set_known_flags(const std::string& text);

/// " (did you mean 'run'?)" for the one of `known` closest to `typed`
/// (did_you_mean), or "" when none is close.
std::string hint_among(const std::string& typed, const std::vector<std::string>& known);

/// hint_among(flag, every flag of baton): " (did you mean '--metrics-out'?)";
/// "" for a flag baton has (a known flag with a bad value is no typo).
std::string flag_hint(const std::string& flag);

/// The line read_flags prints for `flag` that `accept` refused without
/// saying why (report_flag_error): its value when it took one (`value`,
/// else null), else the flag as an unknown argument of `command`.
void report_refused_flag(const char* command, const std::string& flag, const std::string* value);

/// Reads every remaining argument with `accept(flag)`, which takes the values
/// it needs from `a` and says whether the argument was good; the first bad
/// one is reported (report_refused_flag), unless `accept` said why already.
/// Whether all were good.
template <class Accept>
bool read_flags(args& a, const char* command, Accept&& accept) {
  while (!a.done()) {
    const size_t at = a.next;
    auto flag = a.take();
    const int reported = flag_errors_reported();
    if (!accept(flag)) {
      if (flag_errors_reported() == reported)
        report_refused_flag(command, flag, a.next > at + 1 ? &a.items[at + 1] : nullptr);
      return false;
    }
  }
  return true;
}

} // namespace baton::apps
