// node.yaml: what `baton node --config` reads (the node's own actor
// system and the checks before it starts are actors/runtime/node.cpp). Apart
// from the node so that the fuzzers compile the parser without CAF's I/O.
#include "actors/runtime/node_settings.hpp"

#include <chrono>
#include <filesystem>
#include <limits>

#include <yaml-cpp/yaml.h>

#include "actors/config/yaml_codec.hpp"
#include "actors/config/yaml_field.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

using detail::field;

/// The keys of node.yaml and of its `tls:` section.
const std::vector<std::string>& node_keys() {
  static const std::vector<std::string> keys = {
    "name", "host", "port", "scheduler_threads", "heartbeat_ms", "connection_timeout_ms", "tls",
    "data_dirs", "checkpoint_dir", "shared_memory"};
  return keys;
}

const std::vector<std::string>& tls_keys() {
  static const std::vector<std::string> keys = {"certificate", "key", "ca", "allow"};
  return keys;
}

/// Checks that the map `f` has only keys of `allowed`, each a name and none
/// twice, as the topology parser checks its sections.
void check_keys(const field& f, const std::vector<std::string>& allowed) {
  std::string in = f.path().empty() ? "" : " in '" + f.path() + "'";
  std::vector<std::string> seen;
  for (const auto& entry : f.node()) {
    field at = f.child(entry.first, entry.first);
    // yaml-cpp throws on as<std::string>() of a key that is a list or a map
    // (`[a]: 1`), found by fuzz_topology.
    if (!entry.first.IsScalar())
      at.fail("expected a key name, got " + at.shown());
    const std::string& key = entry.first.Scalar();
    if (!detail::contains(allowed, key))
      at.fail("unknown key " + detail::quoted(key) + in + " (expected one of: " +
              detail::join(allowed) + ")");
    if (detail::contains(seen, key))
      at.fail("key " + detail::quoted(key) + " appears twice" +
              (in.empty() ? " at the top level" : in));
    seen.push_back(key);
  }
}

/// An integer from 1 to `max` (at most what T holds).
template <class T>
T read_positive(const field& f,
                int64_t max = static_cast<int64_t>(std::numeric_limits<T>::max())) {
  return static_cast<T>(
    detail::read_integer<int64_t>(f, 1, max, "an integer from 1 to " + std::to_string(max)));
}

/// A list of non-empty strings; paths relative to the node file.
std::vector<std::string> read_list(const field& f, bool paths) {
  std::vector<std::string> out;
  for (const auto& item : f.items("a list, e.g. [a, b]"))
    out.push_back(paths ? detail::read_path(item) : detail::read_string(item));
  return out;
}

/// The `tls:` section: certificate, key, ca (paths) and allow (names).
void read_tls(const field& f, node_settings& s) {
  if (!f.node().IsMap())
    f.expected("a map {certificate, key, ca, allow}");
  check_keys(f, tls_keys());
  auto& tls = s.system.tls;
  detail::read_if(f, "certificate", tls.certificate, detail::read_path);
  detail::read_if(f, "key", tls.key, detail::read_path);
  detail::read_if(f, "ca", tls.ca, detail::read_path);
  detail::read_if(f, "allow", s.tls_allow, [](const field& x) { return read_list(x, false); });
}

/// The settings of the map `root`; throws a config_error.
node_settings read_node_settings(const field& root) {
  if (!root.node().IsMap())
    root.fail("expected a map of node settings (" + detail::join(node_keys()) + "), got " +
              root.shown());
  check_keys(root, node_keys());
  node_settings s;
  auto& sys = s.system;
  auto milliseconds = [](const field& f) {
    return std::chrono::milliseconds{read_positive<int64_t>(f)};
  };
  detail::read_if(root, "name", s.name,
                  [](const field& f) { return detail::read_new_name(f, "node"); });
  detail::read_if(root, "host", s.host, detail::read_string);
  detail::read_if(root, "port", s.port, [](const field& f) { return read_positive<uint16_t>(f); });
  detail::read_if(root, "scheduler_threads", sys.scheduler_threads, [](const field& f) {
    return read_positive<decltype(system_settings::scheduler_threads)>(f, max_scheduler_threads);
  });
  detail::read_if(root, "heartbeat_ms", sys.heartbeat_interval, milliseconds);
  detail::read_if(root, "connection_timeout_ms", sys.connection_timeout, milliseconds);
  if (auto tls = root.get("tls"))
    read_tls(*tls, s);
  detail::read_if(root, "data_dirs", s.paths.data_dirs,
                  [](const field& f) { return read_list(f, true); });
  detail::read_if(root, "checkpoint_dir", s.paths.checkpoint_dir, detail::read_path);
  detail::read_if(root, "shared_memory", s.system.shared_memory, detail::read_bool);
  return s;
}

} // namespace

caf::expected<node_settings> load_node_settings(const std::string& path) {
  // Bounded and regular files only, as a topology: `--config /dev/zero`
  // would otherwise read forever.
  std::string text;
  if (std::string why = detail::read_config_file(path, text); !why.empty())
    return make_error(errc::bad_config, "cannot read node file '" + path + "': " + why);
  return parse_node_settings(text, path);
}

caf::expected<node_settings> parse_node_settings(const std::string& yaml_text,
                                                 const std::string& path) {
  YAML::Node doc;
  try {
    doc = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return make_error(errc::bad_config, path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  detail::source_info source{path, std::filesystem::path{path}.parent_path(), {}};
  try {
    return read_node_settings(field::root(source, doc));
  } catch (const detail::config_error& e) {
    return make_error(errc::bad_config, e.what());
  } catch (const std::exception& e) {
    // yaml-cpp failing where no check expected it: still an error value.
    return make_error(errc::bad_config, path + ": " + e.what());
  }
}

} // namespace runtime
} // namespace baton::actors
