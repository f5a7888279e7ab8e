#include "apps/report/input_check.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "messages/errc.hpp"
#include "model/core/bounded_file.hpp"

namespace baton::apps {

namespace {

using nlohmann::json;

/// The first rule a file breaks: "FIELD: expected ..., got ...".
struct refused {
  std::string message;
};

/// What a field holds, as an error shows it: its JSON, cut short.
std::string shown(const json& j) {
  if (j.is_number_float() && !std::isfinite(j.get<double>()))
    return "a number beyond the range of a double (such as 1e999)";
  auto text = j.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

[[noreturn]] void refuse(const std::string& at, const std::string& expected, const json& got) {
  throw refused{(at.empty() ? std::string{"the top level"} : at) + ": expected " + expected +
                ", got " + shown(got)};
}

std::string child(const std::string& at, const std::string& key) {
  return at.empty() ? key : at + "." + key;
}

std::string item(const std::string& at, size_t i) {
  return at + "[" + std::to_string(i) + "]";
}

// -- the kinds of field -----------------------------------------------------------

/// What a field must be: the types the report reads it as, and the range
/// of a number (the schema's "minimum"/"maximum").
enum class kind { text, flag, object, array, number, non_negative, fraction };

struct rule {
  const char* key;
  kind what;
  bool nullable = false; ///< null is also accepted (the schema's [..., "null"])
};

const char* expected_of(kind k) {
  switch (k) {
    case kind::text: return "a string";
    case kind::flag: return "true or false";
    case kind::object: return "an object";
    case kind::array: return "an array";
    case kind::number: return "a number";
    case kind::non_negative: return "a number at least 0";
    case kind::fraction: return "a number from 0 to 1";
  }
  return "";
}

bool holds(const json& j, kind k) {
  switch (k) {
    case kind::text: return j.is_string();
    case kind::flag: return j.is_boolean();
    case kind::object: return j.is_object();
    case kind::array: return j.is_array();
    case kind::number: return j.is_number();
    case kind::non_negative: return j.is_number() && j.get<double>() >= 0;
    case kind::fraction: return j.is_number() && j.get<double>() >= 0 && j.get<double>() <= 1;
  }
  return false;
}

void expect(const json& j, const std::string& at, kind k, bool nullable = false) {
  if (!holds(j, k) && !(nullable && j.is_null()))
    refuse(at, std::string{expected_of(k)} + (nullable ? " or null" : ""), j);
}

/// Each field of `rules` that `j` (an object) has is of its kind; absent
/// fields are left to the reader's defaults.
void fields(const json& j, const std::string& at, std::initializer_list<rule> rules) {
  expect(j, at, kind::object);
  for (const rule& r : rules)
    if (auto it = j.find(r.key); it != j.end())
      expect(*it, child(at, r.key), r.what, r.nullable);
}

/// `j[key]` if present (checked to be an array of objects, each passed to
/// `each` with its path), else nothing.
template <class Each>
void objects(const json& j, const std::string& at, const char* key, Each&& each) {
  auto it = j.find(key);
  if (it == j.end())
    return;
  const std::string path = child(at, key);
  expect(*it, path, kind::array);
  for (size_t i = 0; i < it->size(); ++i) {
    expect((*it)[i], item(path, i), kind::object);
    each((*it)[i], item(path, i));
  }
}

/// Every number in `j` is finite: JSON has no inf, but a literal beyond a
/// double's range (1e999) reads as one. Recursion is bounded by
/// max_input_depth, checked before parsing.
void finite_numbers(const json& j, const std::string& at) {
  if (j.is_number_float() && !std::isfinite(j.get<double>()))
    refuse(at, "a finite number", j);
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it)
      finite_numbers(it.value(), child(at, it.key()));
  else if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i)
      finite_numbers(j[i], item(at, i));
}

// -- the metrics JSON (docs/outputs.md) -------------------------------------------

void metrics(const json& m, const std::string& at) {
  fields(m, at, {{"mode", kind::text}, {"run", kind::text}, {"job", kind::text},
                 {"heads", kind::array}, {"train_seconds", kind::non_negative},
                 {"wall_seconds", kind::non_negative}, {"failed", kind::text},
                 {"trained", kind::object}, {"steady", kind::object}});
  if (auto s = m.find("steady"); s != m.end())
    fields(*s, child(at, "steady"),
           {{"samples", kind::non_negative}, {"seconds", kind::non_negative}});
  objects(m, at, "heads", [](const json& head, const std::string& h) {
    fields(head, h, {{"name", kind::text}, {"task", kind::text}, {"samples", kind::non_negative},
                     {"test_accuracy", kind::fraction}, {"train_loss", kind::number, true},
                     {"weights_digest", kind::text}, {"epochs", kind::array}});
    objects(head, h, "epochs", [](const json& e, const std::string& at) {
      fields(e, at, {{"epoch", kind::non_negative}, {"test_accuracy", kind::fraction},
                     {"train_loss", kind::number, true}, {"samples", kind::non_negative},
                     {"seconds", kind::non_negative}, {"bytes_sent", kind::non_negative}});
    });
  });
  objects(m, at, "nodes", [](const json& n, const std::string& at) {
    fields(n, at, {{"name", kind::text}, {"peak_rss_bytes", kind::non_negative},
                   {"cpu_seconds", kind::non_negative}, {"cores", kind::non_negative}});
  });
  objects(m, at, "actors", [](const json& a, const std::string& at) {
    fields(a, at, {{"name", kind::text}, {"role", kind::text}, {"node", kind::text},
                   {"busy_seconds", kind::non_negative}, {"idle_seconds", kind::non_negative},
                   {"bubble_seconds", kind::non_negative}, {"figures", kind::object}});
    if (auto f = a.find("figures"); f != a.end())
      fields(*f, child(at, "figures"), {{"steps", kind::non_negative}});
  });
  objects(m, at, "edges", [](const json& e, const std::string& at) {
    fields(e, at, {{"from", kind::text}, {"to", kind::text}, {"messages", kind::non_negative},
                   {"bytes", kind::non_negative}});
  });
  if (auto t = m.find("trained"); t != m.end())
    for (auto it = t->begin(); it != t->end(); ++it)
      fields(it.value(), child(child(at, "trained"), it.key()),
             {{"trained", kind::non_negative}, {"duplicates", kind::non_negative}});
}

// -- a run record and its summary (docs/report.schema.json) -----------------------

void summary(const json& s, const std::string& at) {
  fields(s, at, {{"reached", kind::flag}, {"time_to_target_seconds", kind::non_negative, true},
                 {"time_estimated", kind::flag}, {"best_accuracy", kind::fraction},
                 {"final_accuracy", kind::fraction}, {"epochs_run", kind::non_negative},
                 {"epochs_to_target", kind::non_negative, true},
                 {"train_seconds", kind::non_negative}, {"wall_seconds", kind::non_negative},
                 {"samples_per_second", kind::non_negative}, {"steps", kind::non_negative, true},
                 {"step_seconds", kind::non_negative, true},
                 {"steady_step_seconds", kind::non_negative, true},
                 {"bytes_per_step", kind::non_negative, true},
                 {"bytes_per_epoch", kind::non_negative, true},
                 {"peak_rss_bytes", kind::non_negative}, {"cpu_utilisation", kind::non_negative},
                 {"time_split", kind::object}, {"curve", kind::array}});
  if (auto split = s.find("time_split"); split != s.end())
    fields(*split, child(at, "time_split"), {{"compute", kind::fraction},
                                              {"communication", kind::fraction},
                                              {"waiting", kind::fraction}});
  objects(s, at, "curve", [](const json& point, const std::string& at) {
    fields(point, at, {{"epoch", kind::non_negative}, {"seconds", kind::non_negative},
                       {"test_accuracy", kind::fraction}});
  });
}

/// A predicted step (a run's "predicted", a row of the predictions' "measured").
void predicted_step(const json& p, const std::string& at) {
  fields(p, at, {{"strategy", kind::text}, {"hosts", kind::non_negative},
                 {"step_seconds", kind::non_negative},
                 {"samples_per_second", kind::non_negative},
                 {"samples_per_step", kind::non_negative}});
  if (auto f = p.find("formula"); f != p.end() && f->is_object())
    fields(*f, child(at, "formula"),
           {{"step_seconds", kind::non_negative}, {"samples_per_second", kind::non_negative}});
}

/// The spread of a repeated run (apps/compare/repeats.hpp).
void spread(const json& s, const std::string& at) {
  fields(s, at, {{"runs", kind::non_negative}, {"failed", kind::non_negative},
                 {"reached", kind::non_negative}});
  for (const char* figure : {"time_to_target_seconds", "samples_per_second", "step_seconds"})
    if (auto f = s.find(figure); f != s.end())
      fields(*f, child(at, figure), {{"median", kind::non_negative, true},
                                     {"min", kind::non_negative, true},
                                     {"max", kind::non_negative, true},
                                     {"values", kind::array}});
}

void record(const json& run, const std::string& at) {
  fields(run, at, {{"label", kind::text}, {"strategy", kind::text}, {"command", kind::text},
                   {"source", kind::text}, {"settings", kind::object},
                   {"metrics", kind::object}, {"summary", kind::object},
                   {"predicted", kind::object}, {"spread", kind::object},
                   {"repeats", kind::array}});
  if (auto s = run.find("spread"); s != run.end())
    spread(*s, child(at, "spread"));
  if (auto s = run.find("settings"); s != run.end())
    fields(*s, child(at, "settings"), {{"microbatches_per_step", kind::non_negative},
                                        {"global_batch", kind::non_negative}});
  if (auto m = run.find("metrics"); m != run.end())
    metrics(*m, child(at, "metrics"));
  if (auto s = run.find("summary"); s != run.end())
    summary(*s, child(at, "summary"));
  if (auto p = run.find("predicted"); p != run.end())
    predicted_step(*p, child(at, "predicted"));
}

// -- the header of a report.json ----------------------------------------------------

void predictions(const json& p, const std::string& at) {
  fields(p, at, {{"error", kind::text}, {"note", kind::text}, {"link", kind::object},
                 {"measured", kind::array}, {"projection", kind::array},
                 {"crossovers", kind::array}});
  objects(p, at, "measured", predicted_step);
  objects(p, at, "projection", [](const json& point, const std::string& at) {
    fields(point, at, {{"strategy", kind::text}, {"hosts", kind::non_negative},
                       {"bandwidth_bits", kind::non_negative},
                       {"bandwidth", kind::non_negative},
                       {"samples_per_second", kind::non_negative},
                       {"predicted", kind::object}});
    if (auto inner = point.find("predicted"); inner != point.end())
      predicted_step(*inner, child(at, "predicted"));
  });
  if (auto c = p.find("crossovers"); c != p.end())
    for (size_t i = 0; i < c->size(); ++i)
      if (!(*c)[i].is_string())
        fields((*c)[i], item(child(at, "crossovers"), i),
               {{"sentence", kind::text}, {"faster_above", kind::text},
                {"faster_below", kind::text}});
}

void header(const json& j) {
  fields(j, "", {{"schema", kind::text}, {"target", kind::fraction, true},
                 {"machine", kind::object}, {"cluster", kind::object},
                 {"skipped", kind::array}, {"predictions", kind::object}});
  if (auto w = j.find("workload"); w != j.end() && !w->is_null() && !w->is_string()) {
    fields(*w, "workload", {{"file", kind::text}, {"overrides", kind::array},
                            {"target", kind::fraction, true},
                            {"budget_seconds", kind::non_negative, true}});
  }
  if (auto m = j.find("machine"); m != j.end())
    fields(*m, "machine", {{"cores", kind::non_negative}, {"memory_bytes", kind::non_negative}});
  if (auto c = j.find("cluster"); c != j.end())
    fields(*c, "cluster", {{"description", kind::text}, {"local_nodes", kind::non_negative},
                           {"link", kind::text}});
  objects(j, "", "skipped", [](const json& s, const std::string& at) {
    fields(s, at, {{"strategy", kind::text}, {"reason", kind::text}});
  });
  if (auto p = j.find("predictions"); p != j.end())
    predictions(*p, "predictions");
}

/// Runs `check` on `j`; its refusal as bad_file naming `path`.
template <class Check>
caf::expected<void> checked(const json& j, const std::string& path, Check&& check) {
  try {
    finite_numbers(j, "");
    check(j);
  } catch (const refused& r) {
    return make_error(errc::bad_file, path + ": " + r.message);
  }
  return {};
}

/// The deepest nesting of arrays and objects in `text` (JSON, strings skipped).
size_t nesting(const std::string& text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

/// Follows a parse without building anything, to say where it failed: the
/// field whose value the parser refused (nlohmann refuses 1e999 with
/// "number overflow", not as a syntax error).
class field_tracker : public nlohmann::json_sax<json> {
public:
  /// Where the parse stopped: "runs[0].metrics.wall_seconds".
  const std::string& failed_at() const { return failed_at_; }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool key(string_t& k) override {
    frames_.back().key = k;
    return true;
  }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    failed_at_ = path();
    return false;
  }

private:
  struct frame {
    bool array = false;
    std::string key;  ///< an object's current key
    size_t index = 0; ///< an array's current element
  };

  std::string path() const {
    std::string at;
    for (const auto& f : frames_)
      at = f.array ? item(at, f.index) : child(at, f.key);
    return at;
  }
  /// A whole value ended: the next one of an array is its next element.
  bool value() {
    if (!frames_.empty() && frames_.back().array)
      ++frames_.back().index;
    return true;
  }
  bool open(bool array) {
    frames_.push_back({array, {}, 0});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return value();
  }

  std::vector<frame> frames_;
  std::string failed_at_;
};

} // namespace

caf::expected<json> read_input_json(const std::string& path) {
  // The file's kind and size checked on the file opened (a path that turns
  // into a FIFO between a check and the open does not block the report).
  std::string text;
  if (auto why = model::read_bounded_file(path, text, max_input_bytes, "a report's input");
      !why.empty())
    return make_error(errc::bad_file, path + ": " + why);
  if (auto depth = nesting(text); depth > max_input_depth)
    return make_error(errc::bad_file, path + ": arrays and objects nested " + std::to_string(depth)
                                        + " deep, more than the "
                                        + std::to_string(max_input_depth)
                                        + " of any file baton writes");
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    return make_error(errc::bad_file, path + ": not JSON (" + e.what() + ")");
  } catch (const json::exception& e) {
    // A number beyond a double's range (1e999): name its field.
    field_tracker tracker;
    json::sax_parse(text, &tracker);
    return make_error(errc::bad_file, path + ": " +
                                        (tracker.failed_at().empty() ? std::string{"the top level"}
                                                                     : tracker.failed_at()) +
                                        ": expected a finite number, got " + e.what());
  }
}

caf::expected<void> check_metrics_file(const json& m, const std::string& path) {
  return checked(m, path, [](const json& j) { metrics(j, ""); });
}

caf::expected<void> check_runs_file(const json& file, const std::string& path) {
  return checked(file, path, [](const json& j) {
    if (j.value("schema", json{}) == "baton-report/1")
      header(j);
    else
      fields(j, "", {{"schema", kind::text}});
    objects(j, "", "runs", record);
  });
}

} // namespace baton::apps
