#include "actors/runtime/curves.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

/// A number as a CSV cell: shortest round-tripping text, "nan" for a
/// diverged loss.
std::string cell(double x) {
  if (std::isnan(x))
    return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

/// A validation accuracy's cell: empty without validation samples (-1).
std::string validation_cell(const messages::epoch_result& e) {
  return e.validation_accuracy >= 0 ? cell(e.validation_accuracy) : std::string{};
}

/// `x` over `seconds`, or an empty cell when the seconds are unknown.
std::string rate(double x, double seconds) {
  return seconds > 0 ? cell(x / seconds) : std::string{};
}

/// One row per epoch of result group `h`.
void epoch_rows(const job_result& r, const messages::actor_report& h, std::ostream& out) {
  const auto strategy = strategy_of(r);
  const auto times = r.epoch_seconds.find(h.actor);
  const auto bytes = r.epoch_bytes.find(h.actor);
  double previous = 0;
  for (const auto& e : h.epochs) {
    std::string seconds, per_second, sent;
    if (times != r.epoch_seconds.end() && times->second.count(e.epoch)) {
      const double at = times->second.at(e.epoch);
      seconds = cell(at);
      per_second = rate(static_cast<double>(e.samples), at - previous);
      previous = at;
    }
    if (bytes != r.epoch_bytes.end() && bytes->second.count(e.epoch))
      sent = std::to_string(bytes->second.at(e.epoch));
    out << strategy << ',' << r.result_label << ',' << h.actor << ',' << e.epoch + 1 << ','
        << seconds << ',' << e.samples << ',' << cell(e.train_loss) << ','
        << cell(e.test_accuracy) << ',' << per_second << ',' << sent << ','
        << validation_cell(e) << '\n';
  }
}

/// One row per epoch an actor that is not a result group of its own
/// closed (a data-parallel or IST worker: its share of the group's epoch),
/// kind its role; the seconds, rate and bytes are the group's, not its own.
void actor_epoch_rows(const job_result& r, const messages::actor_report& a, std::ostream& out) {
  for (const auto& e : a.epochs)
    out << strategy_of(r) << ',' << a.role << ',' << a.actor << ',' << e.epoch + 1 << ",,"
        << e.samples << ',' << cell(e.train_loss) << ',' << cell(e.test_accuracy) << ",,,"
        << validation_cell(e) << '\n';
}

/// Whether `a` is one of the result groups of `r` (a head: its rows are the group's).
bool is_group(const job_result& r, const messages::actor_report& a) {
  for (const auto& h : r.heads)
    if (h.actor == a.actor)
      return true;
  return false;
}

/// One row with actor `a`'s totals over the run.
void total_row(const job_result& r, const messages::actor_report& a, std::ostream& out) {
  int64_t bytes = 0;
  for (const auto& e : a.edges)
    bytes += e.bytes;
  const std::string seconds = r.train_seconds > 0 ? cell(r.train_seconds) : std::string{};
  out << strategy_of(r) << ',' << a.role << ',' << a.actor << ",," << seconds << ','
      << a.samples << ",,," << rate(static_cast<double>(a.samples), r.train_seconds) << ','
      << bytes << ",\n";
}

} // namespace

std::string curves_csv(const job_result& r) {
  std::ostringstream out;
  out << curves_header << '\n';
  for (const auto& h : r.heads)
    epoch_rows(r, h, out);
  if (r.run != "actors") // --mode local and the separate baseline run the reference loop
    return out.str();
  for (const auto& a : r.actors)
    if (!is_group(r, a))
      actor_epoch_rows(r, a, out);
  for (const auto& a : r.actors)
    total_row(r, a, out);
  return out.str();
}

caf::expected<void> write_curves(const job_result& r, const std::string& path) {
  if (auto why = model::try_replace_file(path, curves_csv(r)); !why.empty())
    return make_error(errc::bad_file, "--curves: " + why);
  return caf::unit;
}

} // namespace runtime
} // namespace baton::actors
