// baton's error values (messages/errc.hpp) as CAF 0.17 carries them.

#include <set>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/sec.hpp>
#include <gtest/gtest.h>

#include "messages/errc.hpp"
#include "messages/type_ids.hpp"

using namespace baton;

TEST(errc, every_code_has_its_own_name) {
  std::set<std::string> names;
  for (int code = 0; code <= static_cast<int>(errc::interrupted); ++code)
    names.insert(to_string(static_cast<errc>(code)));
  EXPECT_EQ(names.size(), static_cast<size_t>(errc::interrupted) + 1);
  EXPECT_EQ(to_string(errc::payload_too_large), "payload_too_large");
}

TEST(errc, make_error_keeps_code_category_and_context) {
  auto err = make_error(errc::payload_too_large, "tensor of 80 MiB exceeds the 64 MiB limit");
  ASSERT_TRUE(err);
  EXPECT_EQ(err.category(), error_category_atom);
  EXPECT_EQ(err.code(), static_cast<uint8_t>(errc::payload_too_large));
  EXPECT_TRUE(err == errc::payload_too_large);
  EXPECT_TRUE(err != errc::shape_mismatch);
  EXPECT_EQ(describe(err), "payload_too_large: tensor of 80 MiB exceeds the 64 MiB limit");
}

TEST(errc, describe_handles_errors_without_context_and_of_caf) {
  caf::error plain = errc::bad_config;
  EXPECT_EQ(describe(plain), "bad_config");
  EXPECT_EQ(describe(caf::error{}), "none");
  caf::error timeout = caf::sec::request_timeout;
  EXPECT_EQ(describe(timeout), "request_timeout");
}

TEST(errc, the_actor_system_renders_baton_errors) {
  caf::actor_system_config cfg;
  messages::register_types(cfg);
  cfg.set("scheduler.max-threads", 1);
  caf::actor_system sys{cfg};
  auto err = make_error(errc::unknown_dtype, "dtype code 42");
  EXPECT_EQ(sys.render(err), "unknown_dtype: dtype code 42");
}
