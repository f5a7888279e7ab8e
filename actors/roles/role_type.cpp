#include "actors/roles/role_type.hpp"

#include "messages/errc.hpp"
#include "model/core/data_file.hpp"

namespace baton::actors {
inline namespace roles {

caf::error check_path(const std::string& path, const std::string& what,
                      const std::vector<std::string>& roots, const std::string& key) {
  if (roots.empty() || path.empty())
    return caf::none;
  const model::root_check c = model::check_roots(path, roots);
  if (c.inside)
    return caf::none;
  std::string list;
  for (const auto& root : roots)
    list += (list.empty() ? "" : ", ") + root;
  return make_error(errc::bad_file, what + " '" + path + "' (resolved: '" + c.resolved +
                                      "') is outside the node's " + key + " (" + list + ")");
}

caf::error check_checkpoint_path(const std::string& path, const std::string& what,
                                 const path_roots& roots) {
  std::vector<std::string> dirs;
  if (!roots.checkpoint_dir.empty())
    dirs.push_back(roots.checkpoint_dir);
  return check_path(path, what, dirs, "checkpoint_dir");
}

const role_type* find_role(const std::vector<role_type>& roles, const std::string& name) {
  for (const auto& r : roles)
    if (r.name == name)
      return &r;
  return nullptr;
}

} // namespace roles
} // namespace baton::actors
