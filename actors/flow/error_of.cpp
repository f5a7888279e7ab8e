#include "actors/flow/error_of.hpp"

// Only LibTorch's exception type: this file must not pull in <torch/torch.h>.
#include <c10/util/Exception.h>

#include "messages/errc.hpp"
#include "model/core/error.hpp"

namespace baton::actors {
inline namespace flow {

caf::error error_of(const std::exception& e, const std::string& doing) {
  auto with_doing = [&](const std::string& what) {
    return doing.empty() ? what : doing + ": " + what;
  };
  if (dynamic_cast<const model::file_error*>(&e) != nullptr)
    return make_error(errc::bad_file, with_doing(e.what()));
  if (auto* torch = dynamic_cast<const c10::Error*>(&e))
    return make_error(errc::compute_failed, with_doing(torch->what_without_backtrace()));
  return make_error(errc::actor_failed, with_doing(e.what()));
}

} // namespace flow
} // namespace baton::actors
