#include "messages/errc.hpp"

#include <caf/sec.hpp>

namespace baton {

std::string to_string(errc x) {
  switch (x) {
    case errc::none:
      return "none";
    case errc::shape_mismatch:
      return "shape_mismatch";
    case errc::unknown_dtype:
      return "unknown_dtype";
    case errc::unknown_schema_version:
      return "unknown_schema_version";
    case errc::payload_too_large:
      return "payload_too_large";
    case errc::malformed_message:
      return "malformed_message";
    case errc::bad_config:
      return "bad_config";
    case errc::unknown_actor_type:
      return "unknown_actor_type";
    case errc::node_unreachable:
      return "node_unreachable";
    case errc::bad_file:
      return "bad_file";
    case errc::compute_failed:
      return "compute_failed";
    case errc::actor_failed:
      return "actor_failed";
    case errc::interrupted:
      return "interrupted";
  }
  // An out-of-range value can only come from a cast; name it rather than fail.
  return "errc(" + std::to_string(static_cast<int>(x)) + ")";
}

caf::error make_error(errc code, std::string context) {
  return caf::make_error(code, std::move(context));
}

std::string context_of(const caf::error& err) {
  const auto& context = err.context();
  if (context.match_elements<std::string>())
    return context.get_as<std::string>(0);
  return context.empty() ? std::string{} : caf::to_string(context);
}

namespace {

/// "name: context", or "name" alone when there is no context.
std::string join(std::string name, const std::string& context) {
  if (!context.empty()) {
    name += ": ";
    name += context;
  }
  return name;
}

} // namespace

std::string describe(const caf::error& err) {
  if (!err)
    return "none";
  if (err.category() == error_category_atom)
    return join(to_string(static_cast<errc>(err.code())), context_of(err));
  // CAF's own errors (timeouts, lost peers) are common in logs: name them too.
  if (err.category() == caf::atom("system"))
    return join(caf::to_string(static_cast<caf::sec>(err.code())), context_of(err));
  return caf::to_string(err);
}

} // namespace baton
