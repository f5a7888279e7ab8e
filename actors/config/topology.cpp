#include "actors/config/topology.hpp"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "actors/config/topology_file.hpp"
#include "actors/config/topology_parts.hpp"
#include "messages/errc.hpp"
#include "model/core/dataset.hpp"

namespace baton::actors {
inline namespace config {

namespace {

namespace fs = std::filesystem;

// The located fields and their checked readers (actors/config/yaml_field.hpp).
using namespace detail;

static_assert(max_topology_bytes == max_config_bytes, "one limit on config files");

// The jobs of `jobs` that list `key` at `path` ("" the top level), and
// "'path.key'" for errors.
std::vector<std::string> readers_of(const std::vector<job_schema>& jobs, const std::string& path,
                                    const std::string& key) {
  std::vector<std::string> names;
  for (const job_schema& job : jobs)
    if (auto own = job.keys.find(path); own != job.keys.end() && contains(own->second, key))
      names.push_back(job.name);
  return names;
}

// The field at `dotted` ("data_parallel.freeze.policy") under `root`, if
// it is there.
std::optional<field> find_path(const field& root, const std::string& dotted) {
  std::optional<field> f = root;
  std::string segment;
  std::istringstream segments(dotted);
  while (f && std::getline(segments, segment, '.'))
    f = f->node().IsMap() ? f->get(segment) : std::nullopt;
  return f;
}

// The keys the job says it does not read (job_schema::refusals), a common
// one (backbone.model under job: ist) or another job's, refused with its
// reason before anything reads them: "'backbone.model' is convnet, but ...".
void refuse_unread_keys(const field& root, const topology& t) {
  for (const auto& [dotted, reason] : t.schema->refusals) {
    std::optional<field> f = find_path(root, dotted);
    if (!f)
      continue;
    const YAML::Node& value = f->node();
    f->fail("'" + dotted + "' is " +
            (value.IsScalar() ? shortened(value.Scalar(), max_quoted_bytes)
                              : value.IsSequence() ? "a list" : "a map") +
            ", but " + reason);
  }
}

// A key another job added to a common section (`path`), present here (the
// job's own refusals came first): who reads it.
void refuse_key(const field& f, const std::string& dotted, const job_schema& owner,
                const topology& t) {
  const std::string job = "job: " + owner.name;
  f.fail("'" + dotted + "' is read only by " +
         (owner.readers.empty() ? job : owner.readers + " (" + job + ")") + "; job: " + t.job +
         " does not");
}

// A job's own section is read with that job only, and the keys it adds to
// the common sections (the top level, `backbone`) likewise, unless the job
// also lists them.
void refuse_other_jobs(const field& root, const std::vector<job_schema>& jobs,
                       const topology& t) {
  for (const job_schema& job : jobs)
    if (job.name != t.job && !job.section.empty())
      if (auto f = root.get(job.section); f && !f->is_null())
        f->fail("'" + job.section + "' is only read with job: " + job.name + " (the job is '" +
                t.job + "')");
  for (const job_schema& job : jobs) {
    if (job.name == t.job)
      continue;
    for (const auto& [path, keys] : job.keys) {
      if (section_keys().count(path) == 0)
        continue; // in the job's own section: refused whole above
      std::optional<field> section = path.empty() ? root : root.get(path);
      for (const auto& key : keys)
        if (auto f = section ? section->get(key) : std::nullopt;
            f && !contains(readers_of(jobs, path, key), t.job))
          refuse_key(*f, child_path(path, key), job, t);
    }
  }
}

// What the job's settings refuse of recovery (job_reading::refuses_recovery),
// refused where the run asks for it: at runtime.checkpoint_every, else at
// the faults.
void refuse_recovery(const field& root, const job_reading& job, const topology& t) {
  std::optional<field> blame;
  if (auto runtime = root.get("runtime"); runtime && t.runtime.checkpoint_every > 0)
    blame = runtime->get("checkpoint_every");
  if (!blame && !t.faults.empty())
    blame = root.get("faults");
  if (!blame)
    return;
  for (const auto& refusal : job.refuses_recovery) {
    auto at = refusal.path.empty() ? blame : find_path(root, refusal.path);
    (at ? *at : *blame).fail(blame->name() + " " + refusal.why);
  }
}

// Delays and drops name credit edges: refused, each at its list entry, for a
// job whose actors exchange on none (job_reading::refuses_edge_faults).
void refuse_edge_faults(const field& root, const job_reading& job, const topology& t) {
  if (job.refuses_edge_faults.empty() || t.faults.empty())
    return;
  size_t i = 0;
  for (const field& item : root.require("faults").items("a list of faults", max_faults)) {
    const auto& f = t.faults.at(i++);
    if (f.kind == "delay" || f.kind == "drop")
      item.fail("fault '" + f.kind + "' is not supported by job: " + t.job + " (" +
                job.refuses_edge_faults + "; expected throw, kill_node, stop_node or chaos)");
  }
}

// `job:`, one of `jobs` (the first when absent); a job without a parser is
// planned, not implemented yet.
void parse_job(const field& root, const std::vector<job_schema>& jobs, topology& t) {
  std::vector<std::string> names, implemented;
  for (const job_schema& job : jobs) {
    names.push_back(job.name);
    if (job.parse != nullptr)
      implemented.push_back("'" + job.name + "'");
  }
  std::optional<field> f = root.get("job");
  t.job = f ? read_choice(*f, names) : jobs.at(0).name;
  t.schema = &*std::find_if(jobs.begin(), jobs.end(),
                            [&](const job_schema& job) { return job.name == t.job; });
  if (t.schema->parse == nullptr)
    (f ? *f : root).fail("job '" + t.job + "' is not implemented yet (only " + join(implemented) +
                         " are)");
}

// A fault at a step the job never reaches would never fire: a run "with a
// fault" that has none. Refused, at its `at_step`, once the job's length is
// known (the job's own, else the data's).
void refuse_unreachable_faults(const field& root, const std::optional<job_length>& length,
                               const topology& t) {
  if (!length || t.faults.empty())
    return;
  size_t i = 0;
  for (const field& item : root.require("faults").items("a list of faults", max_faults)) {
    const fault_spec& f = t.faults.at(i++);
    std::optional<field> at_step = item.get("at_step");
    if (!at_step || f.at_step < length->steps)
      continue;
    const std::string& step = length->step;
    const std::string expected =
      length->steps == 0 ? "expected no fault at a " + step
                         : "expected a " + step + " from 0 to " + std::to_string(length->steps - 1);
    at_step->fail(at_step->name() + " is " + std::to_string(f.at_step) + ", but the job has "
                  + std::to_string(length->steps) + " " + step + "s (" + length->how
                  + "), so the fault would never fire (" + expected + ")");
  }
}

// Sections are read in dependency order, each reader file entered once: the
// cluster (nodes before any `node:` key), the job (its schema decides what
// else is read), the workload (the data set before the tasks' labels, the
// tasks before the backbone's pretrain task and `task`), the job's own
// section, then what needs the job's length (the faults' steps).
topology build_topology(const field& root, const std::vector<job_schema>& jobs) {
  check_section(root);
  topology t;
  t.file = root.source().file;
  read_cluster(root, t);
  parse_job(root, jobs, t);
  refuse_unread_keys(root, t);
  workload_reading workload = read_workload(root, t);
  refuse_other_jobs(root, jobs, t);
  job_reading job = t.schema->parse(root, workload.layers, t);
  t.mode_spec = std::move(job.settings);
  refuse_unreachable_faults(root, job.own_length ? job.length : workload.length, t);
  refuse_recovery(root, job, t);
  refuse_edge_faults(root, job, t);
  return t;
}

YAML::Node load_document(const std::string& text, const std::string& name) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    fail_at(name + ":" + std::to_string(std::max(e.mark.line, 0) + 1),
            "YAML syntax error: " + e.msg + " (column " + std::to_string(e.mark.column + 1)
              + ")");
  }
  // An empty file is an empty map, so that `--set` can still add to it.
  if (doc.IsNull())
    doc = YAML::Node(YAML::NodeType::Map);
  return doc;
}

caf::expected<topology> parse_document(const std::string& yaml_text, source_info source,
                                       const std::vector<std::string>& overrides,
                                       const std::vector<job_schema>& jobs) {
  source.jobs = &jobs;
  const std::string& name = source.file;
  try {
    YAML::Node doc = load_document(yaml_text, name);
    field root = field::root(source, doc);
    if (!doc.IsMap())
      root.expected("a map of sections (" + join(*keys_of("", source)) + ")");
    for (const auto& text : overrides)
      apply_override(doc, text, source);
    topology t = build_topology(root, jobs);
    t.text = yaml_text;
    return t;
  } catch (const config_error& e) {
    return make_error(errc::bad_config, e.what());
  } catch (const std::exception& e) {
    // yaml-cpp, LibTorch or the file system failing where no check expected
    // it: still an error value, never an exception out of the parser.
    return make_error(errc::bad_config, name + ": " + e.what());
  }
}

// Every scalar under `node` by dotted path into `out`; an empty map or list,
// or a null, is a value of its own so that adding or removing one shows.
// YAML aliases are expanded here, so nested ones could multiply a small file
// into billions of values: at most max_flattened are.
void flatten(const YAML::Node& node, const std::string& path,
             std::map<std::string, std::string>& out, const std::string& file) {
  constexpr size_t max_flattened = 100000;
  if (out.size() >= max_flattened)
    fail_at(file, "the topology has more than " + std::to_string(max_flattened)
                    + " values once its YAML aliases are expanded");
  if (node.IsMap() && node.size() > 0) {
    for (const auto& kv : node)
      flatten(kv.second, child_path(path, kv.first.Scalar()), out, file);
  } else if (node.IsSequence() && node.size() > 0) {
    for (size_t i = 0; i < node.size(); ++i)
      flatten(node[i], child_path(path, std::to_string(i)), out, file);
  } else {
    out[path] = node.IsScalar() ? node.Scalar() : node.IsMap() ? "{}"
                                                 : node.IsSequence() ? "[]" : "~";
  }
}

} // namespace

caf::expected<std::map<std::string, std::string>>
topology_values(const std::string& yaml_text, const std::string& name,
                const std::vector<std::string>& overrides, const std::vector<job_schema>& jobs) {
  source_info source{name, {}, {}, &jobs};
  try {
    YAML::Node doc = load_document(yaml_text, name);
    for (const auto& text : overrides)
      apply_override(doc, text, source);
    std::map<std::string, std::string> values;
    flatten(doc, "", values, name);
    return values;
  } catch (const config_error& e) {
    return make_error(errc::bad_config, e.what());
  } catch (const std::exception& e) {
    return make_error(errc::bad_config, name + ": " + e.what());
  }
}

caf::expected<topology> parse_topology_as(const std::string& yaml_text, const std::string& path,
                                          const std::vector<std::string>& overrides,
                                          const std::vector<job_schema>& jobs) {
  return parse_document(yaml_text, source_info{path, fs::path(path).parent_path(), {}}, overrides,
                        jobs);
}

const model::task* workload::find_task(const std::string& name) const {
  auto it = std::find_if(tasks.begin(), tasks.end(),
                         [&](const model::task& t) { return t.name == name; });
  return it == tasks.end() ? nullptr : &*it;
}

caf::expected<std::string> read_topology_file(const std::string& path) {
  std::string text;
  if (std::string why = read_config_file(path, text); !why.empty())
    return make_error(errc::bad_config, "cannot read topology file '" + path + "': " + why);
  return text;
}

caf::expected<topology> load_topology(const std::string& path,
                                      const std::vector<std::string>& overrides,
                                      const std::vector<job_schema>& jobs) {
  auto text = read_topology_file(path);
  if (!text)
    return text.error();
  return parse_document(*text, source_info{path, fs::path(path).parent_path(), {}}, overrides,
                        jobs);
}

caf::expected<topology> parse_topology(const std::string& yaml_text, const std::string& name,
                                       const std::vector<std::string>& overrides,
                                       const std::vector<job_schema>& jobs) {
  // `name` only labels messages (it may be "<embedded ...>"): relative paths
  // are resolved against the working directory.
  return parse_document(yaml_text, source_info{name, {}, {}}, overrides, jobs);
}

topology with_local_nodes(topology t, int32_t count) {
  t.nodes.clear();
  for (int32_t i = 1; i <= count; ++i)
    t.nodes.push_back({"n" + std::to_string(i), "127.0.0.1", 0, ""});
  return t;
}

} // namespace config
} // namespace baton::actors
