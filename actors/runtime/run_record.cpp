#include "actors/runtime/run_record.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "actors/config/yaml_field.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"
#include "model/core/bounded_file.hpp"

namespace baton::actors {
inline namespace runtime {

namespace fs = std::filesystem;

namespace {

/// How long a value may be in a difference message: a list of 10,000
/// labels is a path per label, but one value is still quoted short.
constexpr size_t shown_length = 40;

std::string shown(const std::string& value) {
  return value.size() <= shown_length ? value : value.substr(0, shown_length) + "...";
}

bool is_fault_override(const std::string& text) {
  return text.rfind("faults", 0) == 0;
}

/// Whether `path`'s first segment is `section` or one of its segments is
/// `segment`.
bool starts_with_section(const std::string& path, const std::string& section) {
  return path == section || path.rfind(section + ".", 0) == 0;
}

bool has_segment(const std::string& path, const std::string& segment) {
  std::istringstream segments(path);
  for (std::string s; std::getline(segments, s, '.');)
    if (s == segment)
      return true;
  return false;
}

} // namespace

std::string run_record_path(const std::string& checkpoint_dir) {
  return (fs::path(checkpoint_dir) / "run.yaml").string();
}

bool has_run_record(const std::string& dir) {
  std::error_code ec;
  return fs::exists(run_record_path(dir), ec);
}

run_record make_run_record(const std::string& topology_file, const std::string& text,
                           const std::vector<std::string>& overrides) {
  run_record r;
  r.run_id = new_run_id();
  r.topology_text = text;
  if (!topology_file.empty()) {
    std::error_code ec;
    r.topology_file = fs::absolute(topology_file, ec).lexically_normal().string();
  }
  for (const auto& o : overrides)
    if (!is_fault_override(o))
      r.overrides.push_back(o);
  return r;
}

namespace {

/// The fields of run.yaml's `outputs` map and of run_record, listed once
/// for writing and reading.
const std::vector<std::pair<const char*, std::string run_record::*>> output_fields{
  {"metrics", &run_record::metrics_file},
  {"curves", &run_record::curves_file},
  {"trace", &run_record::trace_file},
  {"model", &run_record::model_file}};

/// run.yaml's text for `record`.
std::string record_text(const run_record& record) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "run_id" << YAML::Value << YAML::SingleQuoted << record.run_id;
  if (record.finished_step >= 0)
    out << YAML::Key << "finished" << YAML::Value << YAML::BeginMap << YAML::Key << "step"
        << YAML::Value << record.finished_step << YAML::EndMap;
  out << YAML::Key << "outputs" << YAML::Value << YAML::BeginMap;
  for (const auto& [key, member] : output_fields)
    out << YAML::Key << key << YAML::Value << YAML::SingleQuoted << record.*member;
  out << YAML::EndMap;
  out << YAML::Key << "actors" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const auto& a : record.actors)
    out << YAML::SingleQuoted << a;
  out << YAML::EndSeq;
  out << YAML::Key << "topology_file" << YAML::Value << record.topology_file;
  out << YAML::Key << "overrides" << YAML::Value << YAML::BeginSeq;
  for (const auto& o : record.overrides)
    out << YAML::SingleQuoted << o;
  out << YAML::EndSeq;
  out << YAML::Key << "topology" << YAML::Value << YAML::Literal << record.topology_text;
  out << YAML::EndMap;
  return std::string{"# Written by baton run: the topology, --set options and outputs of the "
                     "run whose\n# checkpoints are in this directory. `baton run --resume DIR` "
                     "reads it.\n"} +
         out.c_str() + '\n';
}

} // namespace

std::string new_run_id() {
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) {
    char word[9];
    std::snprintf(word, sizeof word, "%08x", static_cast<unsigned>(random()));
    id += word;
  }
  return id;
}

caf::error check_record_size(const run_record& record) {
  auto bytes = record_text(record).size();
  if (bytes <= max_record_bytes)
    return caf::none;
  return make_error(errc::bad_config,
                    "the run's record (its topology and " +
                      std::to_string(record.overrides.size()) + " --set options) would take " +
                      std::to_string(bytes) + " bytes as run.yaml, over the " +
                      std::to_string(max_record_bytes >> 20) +
                      " MiB that `baton run --resume` reads: put the settings in the "
                      "topology file instead of --set options");
}

caf::error write_run_record(const std::string& dir, const run_record& record) {
  if (auto err = check_record_size(record))
    return err;
  // All or nothing (a full disk keeps the previous record, no temporary file).
  if (auto why = model::try_replace_file(run_record_path(dir), record_text(record)); !why.empty())
    return make_error(errc::bad_file, why);
  return caf::none;
}

caf::expected<run_record> read_run_record(const std::string& dir) {
  auto path = run_record_path(dir);
  // What write_run_record writes (at most max_record_bytes); a record that
  // is a device or a FIFO is refused unread.
  std::string text;
  if (std::string why = model::read_bounded_file(path, text, max_record_bytes, "a run record");
      !why.empty())
    return make_error(errc::bad_file, path + ": cannot read the run record: " + why);
  // What is wrong, by key: yaml-cpp's own words ("operator[] call on a
  // scalar", "bad conversion") say nothing to whoever edited the file.
  auto text_of = [](const YAML::Node& node, const std::string& what) {
    if (!node || !node.IsScalar())
      throw YAML::Exception(YAML::Mark::null_mark(), "no text at " + what);
    return node.as<std::string>();
  };
  auto text_at = [&](const YAML::Node& map, const char* key) {
    return text_of(map[key], std::string{"'"} + key + "'");
  };
  auto texts_at = [&](const YAML::Node& map, const char* key, std::vector<std::string>& out) {
    const auto node = map[key];
    if (node && !node.IsSequence())
      throw YAML::Exception(YAML::Mark::null_mark(), std::string{"'"} + key + "' is no list");
    for (size_t i = 0; node && i < node.size(); ++i)
      out.push_back(text_of(node[i], std::string{"'"} + key + "' item " + std::to_string(i + 1)));
  };
  try {
    auto doc = YAML::Load(text);
    if (!doc.IsMap())
      throw YAML::Exception(YAML::Mark::null_mark(), "not a map of keys");
    run_record r;
    r.topology_file = text_at(doc, "topology_file");
    r.topology_text = text_at(doc, "topology");
    texts_at(doc, "overrides", r.overrides);
    // Absent in the record of a baton before run ids.
    if (doc["run_id"])
      r.run_id = doc["run_id"].as<std::string>();
    if (auto finished = doc["finished"]) {
      r.finished_step = finished["step"].as<int64_t>();
      // A baton before `outputs` recorded these two when the run finished.
      if (finished["metrics"])
        r.metrics_file = finished["metrics"].as<std::string>();
      if (finished["model"])
        r.model_file = finished["model"].as<std::string>();
    }
    if (auto outputs = doc["outputs"])
      for (const auto& [key, member] : output_fields)
        if (outputs[key])
          r.*member = outputs[key].as<std::string>();
    texts_at(doc, "actors", r.actors);
    return r;
  } catch (const YAML::Exception& e) {
    return make_error(errc::bad_file, path + ": not a run record written by baton (" + e.msg +
                                        "); give the topology and --set of that run");
  }
}

std::map<std::string, std::string>
training_settings(const std::map<std::string, std::string>& values) {
  std::map<std::string, std::string> out;
  for (const auto& [path, value] : values) {
    // target_accuracy says when to stop, not what is trained (it was
    // runtime.stop_at_accuracy): a resume may change it.
    bool free = starts_with_section(path, "runtime") || starts_with_section(path, "faults") ||
                path == "target_accuracy" ||
                starts_with_section(path, "nodes") || has_segment(path, "node") ||
                has_segment(path, "nodes") || has_segment(path, "place");
    if (!free)
      out.emplace(path, value);
  }
  return out;
}

std::string settings_difference(const std::map<std::string, std::string>& then,
                                const std::map<std::string, std::string>& now) {
  std::string out;
  size_t listed = 0, differing = 0;
  auto add = [&](const std::string& path, const std::string& before, const std::string& after) {
    if (++differing > 10)
      return;
    ++listed;
    out += (out.empty() ? "" : "; ") + path + ": " + before + " then, " + after + " now";
  };
  for (const auto& [path, value] : then) {
    auto it = now.find(path);
    if (it == now.end())
      add(path, shown(value), "absent");
    else if (it->second != value)
      add(path, shown(value), shown(it->second));
  }
  for (const auto& [path, value] : now)
    if (then.count(path) == 0)
      add(path, "absent", shown(value));
  if (differing > listed)
    out += "; and " + std::to_string(differing - listed) + " more";
  return out;
}

} // namespace runtime
} // namespace baton::actors
