#include "messages/type_ids.hpp"

#include "messages/errc.hpp"

namespace baton::messages {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::baton>();
  // Lets `actor_system::render(err)` print baton errors as describe() does.
  // (0.17.6's add_error_category<T> template does not compile: its renderer
  // has the wrong signature, hence the explicit one.)
  cfg.add_error_category(error_category_atom,
                         [](uint8_t code, caf::atom_value category, const caf::message& context) {
                           return describe(caf::error{code, category, context});
                         });
}

} // namespace baton::messages
