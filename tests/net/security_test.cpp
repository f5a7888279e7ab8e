// Security end to end: `baton certs`, mutual TLS between real `baton node`
// processes and the coordinator, the identity proof that closes CAF's name
// gap (node names, tls.allow), and the nodes' path restrictions.

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <gtest/gtest.h>

#include "actors/config/role_settings.hpp"
#include "actors/modes/data_parallel/shard.hpp"
#include "actors/modes/data_parallel/worker.hpp"
#include "actors/modes/pipeline/stage.hpp"
#include "actors/modes/registry.hpp"
#include "actors/modes/transfer/head.hpp"
#include "actors/modes/transfer/stage.hpp"
#include "actors/net/certs.hpp"
#include "actors/net/tls.hpp"
#include "actors/roles/source.hpp"
#include "actors/runtime/spawner.hpp"
#include "actors/net/system.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "model/core/specs.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/data_files.hpp"
#include "tests/support/jobs.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/node_process.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton;
using namespace baton::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream{path} << text;
}

mode_t mode_of(const std::string& path) {
  struct stat st{};
  ::stat(path.c_str(), &st);
  return st.st_mode & 07777;
}

class security : public ::testing::Test {
protected:
  /// One cluster CA with certificates for the coordinator, n1 and n2, and
  /// another CA with its own "coordinator".
  static void SetUpTestSuite() {
    dir_ = std::make_unique<scratch_dir>("security");
    for (const auto& args : std::vector<std::vector<std::string>>{
           {"certs", "init", certs()},
           {"certs", "issue", "coordinator", "--dir", certs()},
           {"certs", "issue", "n1", "--dir", certs()},
           {"certs", "issue", "n2", "--dir", certs()},
           {"certs", "init", other()},
           {"certs", "issue", "coordinator", "--dir", other()}}) {
      auto out = run_baton(args);
      ASSERT_EQ(out.exit_code, 0) << out.text;
    }
  }

  static void TearDownTestSuite() { dir_.reset(); }

  static std::string certs() { return dir_->path() + "/certs"; }
  static std::string other() { return dir_->path() + "/other-ca"; }

  /// --tls-cert/--tls-key/--tls-ca for certificate `name` of the CA in `ca_dir`.
  static std::vector<std::string> tls(const std::string& name, const std::string& ca_dir = certs()) {
    return {"--tls-cert", ca_dir + "/" + name + ".pem", "--tls-key", ca_dir + "/" + name + ".key",
            "--tls-ca", ca_dir + "/ca.pem"};
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

/// An in-process client for sending a spawner raw messages.
struct client {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;

  explicit client(const actors::tls_settings& tls = {}) {
    actors::system_settings settings;
    settings.tls = tls;
    actors::configure(cfg, settings);
    sys = std::make_unique<caf::actor_system>(cfg);
  }

  /// The error a spawn request of `role` gets, or none if it was served.
  caf::error spawn(const caf::actor& spawner, const std::string& role, const std::string& spec) {
    caf::scoped_actor self{*sys};
    caf::error result;
    self->request(spawner, 10s, messages::spawn_request{role, "x", spec, {}})
      .receive([&](caf::actor& started) { caf::anon_send_exit(started, caf::exit_reason::kill); },
               [&](caf::error& err) { result = err; });
    return result;
  }
};

std::string synthetic_source_spec() {
  actors::source_settings spec;
  spec.data.kind = "synthetic";
  spec.data.shape = {1, 28, 28};
  return to_yaml(spec);
}

} // namespace

// -- baton certs ---------------------------------------------------------------

TEST_F(security, certs_init_and_issue_write_private_keys_and_a_valid_chain) {
  scratch_dir scratch{"certs"};
  auto dir = scratch.path() + "/ca";
  auto ca = actors::init_cluster_ca(dir);
  ASSERT_TRUE(ca) << describe(ca.error());
  EXPECT_EQ(mode_of(ca->key), 0600u);
  EXPECT_EQ(mode_of(ca->certificate), 0644u);
  EXPECT_EQ(mode_of(dir), 0700u) << "a directory it creates is private";
  auto n1 = actors::issue_certificate("n1", dir);
  ASSERT_TRUE(n1) << describe(n1.error());
  EXPECT_EQ(n1->certificate, dir + "/n1.pem");
  EXPECT_EQ(mode_of(n1->key), 0600u);
  EXPECT_FALSE(actors::check_tls_files({n1->certificate, n1->key, ca->certificate}));
  auto cert = actors::read_certificate(n1->certificate);
  ASSERT_TRUE(cert);
  EXPECT_EQ(actors::certificate_names(cert->get()), (std::vector<std::string>{"n1"}));
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << "left " << entry.path();
}

TEST_F(security, certs_existing_files_are_replaced_only_with_force) {
  scratch_dir scratch{"certs"};
  const auto& dir = scratch.path();
  ASSERT_TRUE(actors::init_cluster_ca(dir));
  auto first = read_text(dir + "/ca.pem");
  auto again = actors::init_cluster_ca(dir);
  ASSERT_FALSE(again);
  EXPECT_NE(describe(again.error()).find("already exists (pass --force"), std::string::npos)
    << describe(again.error());
  EXPECT_EQ(read_text(dir + "/ca.pem"), first);
  ASSERT_TRUE(actors::issue_certificate("n1", dir));
  EXPECT_FALSE(actors::issue_certificate("n1", dir));
  ASSERT_TRUE(actors::issue_certificate("n1", dir, true));
  ASSERT_TRUE(actors::init_cluster_ca(dir, true));
  EXPECT_NE(read_text(dir + "/ca.pem"), first);
  // n1 was signed by the replaced CA: no longer valid for the new one.
  auto err = actors::check_tls_files({dir + "/n1.pem", dir + "/n1.key", dir + "/ca.pem"});
  EXPECT_NE(describe(err).find("is not valid for the CA"), std::string::npos) << describe(err);
}

TEST_F(security, certs_issue_needs_a_ca_and_a_plain_name) {
  scratch_dir scratch{"certs"};
  const auto& dir = scratch.path();
  auto missing = actors::issue_certificate("n1", dir);
  ASSERT_FALSE(missing);
  EXPECT_NE(describe(missing.error()).find("run `baton certs init " + dir + "` first"),
            std::string::npos)
    << describe(missing.error());
  ASSERT_TRUE(actors::init_cluster_ca(dir));
  for (const auto& bad : std::vector<std::string>{"", "ca", "../n1", "-n1", "n 1",
                                                  std::string(65, 'a')})
    EXPECT_FALSE(actors::issue_certificate(bad, dir)) << "'" << bad << "'";
  EXPECT_FALSE(fs::exists(dir + "/../n1.pem"));
}

TEST_F(security, certs_command_line_refuses_overwrite) {
  scratch_dir scratch{"certs"};
  const auto& dir = scratch.path();
  EXPECT_EQ(run_baton({"certs", "init", dir}).exit_code, 0);
  auto again = run_baton({"certs", "init", dir});
  EXPECT_EQ(again.exit_code, 2) << again.text;
  EXPECT_NE(again.text.find("already exists"), std::string::npos) << again.text;
  auto issue = run_baton({"certs", "issue", "n1"});
  EXPECT_EQ(issue.exit_code, 2) << "--dir is required";
}

// Issue 21 item 13: `--days 0` said only "bad argument '--days'", `--days -5`
// "expects a non-negative integer" (which 0 is). One rule, one message.
TEST_F(security, certs_days_out_of_range_get_one_message_naming_the_range) {
  scratch_dir scratch{"certs"};
  const auto& dir = scratch.path();
  ASSERT_EQ(run_baton({"certs", "init", dir}).exit_code, 0);
  for (const auto& days : {"0", "-5", "3651", "ten", "1.5", ""}) {
    auto out = run_baton({"certs", "issue", "n1", "--dir", dir, "--days", days});
    EXPECT_EQ(out.exit_code, 2) << days << ": " << out.text;
    // An empty value is refused as every flag's is (args::value).
    const std::string message = *days == '\0' ? "--days needs a value, got an empty one"
                                               : "--days expects an integer from 1 to 3650, got '" +
                                                   std::string{days} + "'";
    EXPECT_NE(out.text.find(message), std::string::npos) << days << ": " << out.text;
    EXPECT_FALSE(fs::exists(dir + "/n1.pem")) << days;
  }
  for (const auto& days : {"1", "3650"}) {
    auto out = run_baton({"certs", "issue", "n1", "--dir", dir, "--days", days, "--force"});
    EXPECT_EQ(out.exit_code, 0) << days << ": " << out.text;
  }
}

// -- certificate names (RFC 6125) ------------------------------------------------------

namespace {

/// A certificate of the CA in `ca_dir` made by the openssl command, not by
/// baton: subject CN `common_name`, subjectAltName `san` (e.g.
/// "DNS:intruder"; empty: none). Writes DIR/LABEL.pem and DIR/LABEL.key.
void openssl_certificate(const std::string& ca_dir, const std::string& dir,
                         const std::string& label, const std::string& common_name,
                         const std::string& san) {
  auto base = dir + "/" + label;
  write_file(base + ".ext", san.empty() ? "basicConstraints=CA:FALSE\n"
                                        : "subjectAltName=" + san + "\n");
  auto out = run_shell(
    "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " +
    quote(base + ".key") + " -subj " + quote("/CN=" + common_name) + " -out " +
    quote(base + ".csr") + " 2>&1 && openssl x509 -req -in " + quote(base + ".csr") + " -CA " +
    quote(ca_dir + "/ca.pem") + " -CAkey " + quote(ca_dir + "/ca.key") +
    " -set_serial 4242 -days 2 -sha256 -extfile " + quote(base + ".ext") + " -out " +
    quote(base + ".pem") + " 2>&1");
  ASSERT_EQ(out.exit_code, 0) << out.text;
}

std::vector<std::string> names_in(const std::string& pem) {
  auto cert = actors::read_certificate(pem);
  return cert ? actors::certificate_names(cert->get()) : std::vector<std::string>{"unreadable"};
}

} // namespace

// Issue 21 item 14: a certificate whose CN and DNS name disagree passed as
// either name. Now its names are its DNS names; the CN only counts without one.
TEST_F(security, certificate_names_are_its_dns_names_and_its_cn_only_without_one) {
  scratch_dir scratch{"names"};
  const auto& dir = scratch.path();
  openssl_certificate(certs(), dir, "mixed", "coordinator", "DNS:intruder");
  openssl_certificate(certs(), dir, "two", "coordinator", "DNS:a, DNS:b, IP:127.0.0.1");
  openssl_certificate(certs(), dir, "cn-only", "coordinator", "");
  openssl_certificate(certs(), dir, "ip-only", "coordinator", "IP:127.0.0.1");
  EXPECT_EQ(names_in(dir + "/mixed.pem"), (std::vector<std::string>{"intruder"}));
  EXPECT_EQ(names_in(dir + "/two.pem"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(names_in(dir + "/cn-only.pem"), (std::vector<std::string>{"coordinator"}));
  EXPECT_EQ(names_in(dir + "/ip-only.pem"), (std::vector<std::string>{"coordinator"}))
    << "an IP entry is not a DNS name: the CN is still the name";
  EXPECT_EQ(names_in(certs() + "/n1.pem"), (std::vector<std::string>{"n1"}));
}

// The same end to end: a node that allows only "coordinator" refuses a
// coordinator whose certificate says CN=coordinator but DNS:intruder.
TEST_F(security, coordinator_whose_dns_name_is_not_allowed_is_refused_despite_its_cn) {
  scratch_dir scratch{"names"};
  const auto& dir = scratch.path();
  openssl_certificate(certs(), dir, "mixed", "coordinator", "DNS:intruder");
  auto args = tls("n1");
  args.insert(args.end(), {"--tls-allow", "coordinator"});
  node_process node{dir_->path(), "n1", args};
  ASSERT_NE(node.port(), 0) << node.log();
  auto out = run_baton(with(transfer_job_on("n1", node.port()),
                            {"--tls-cert", dir + "/mixed.pem", "--tls-key", dir + "/mixed.key",
                             "--tls-ca", certs() + "/ca.pem"}));
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("does not accept the certificate for 'intruder': not in its "
                          "tls.allow (coordinator)"),
            std::string::npos)
    << out.text;
  EXPECT_EQ(node.log().find("n1: spawned"), std::string::npos) << node.log();
}

// -- checks before an actor system starts ----------------------------------------------

TEST_F(security, bad_tls_files_are_errors_not_aborts) {
  auto mismatch = actors::check_tls_files(
    {certs() + "/n1.pem", certs() + "/n2.key", certs() + "/ca.pem"});
  EXPECT_NE(describe(mismatch).find("is not the key of the certificate"), std::string::npos)
    << describe(mismatch);
  auto foreign = actors::check_tls_files(
    {other() + "/coordinator.pem", other() + "/coordinator.key", certs() + "/ca.pem"});
  EXPECT_NE(describe(foreign).find("is not valid for the CA"), std::string::npos);
  auto partial = actors::check_tls_files({certs() + "/n1.pem", "", ""});
  EXPECT_NE(describe(partial).find("missing: key, ca"), std::string::npos);
  // CAF would abort the process on the mismatched key: baton exits with 2.
  auto node = run_baton({"node", "--tls-cert", certs() + "/n1.pem", "--tls-key",
                         certs() + "/n2.key", "--tls-ca", certs() + "/ca.pem"});
  EXPECT_EQ(node.exit_code, 2) << node.text;
  auto coordinator =
    run_baton(with(transfer_job_on("n1", 1), {"--tls-cert", certs() + "/n1.pem", "--tls-key",
                                              certs() + "/n2.key", "--tls-ca",
                                              certs() + "/ca.pem"}));
  EXPECT_EQ(coordinator.exit_code, 2) << coordinator.text;
  EXPECT_NE(coordinator.text.find("runtime.tls"), std::string::npos) << coordinator.text;
}

// -- mutual TLS ------------------------------------------------------------------

TEST_F(security, mutual_tls_run_works_with_allow_list_and_path_roots) {
  auto yaml = dir_->path() + "/tls-node.yaml";
  write_file(yaml, "tls:\n"
                   "  certificate: certs/n1.pem\n" // relative to the file
                   "  key: certs/n1.key\n"
                   "  ca: certs/ca.pem\n"
                   "  allow: [coordinator]\n"
                   "data_dirs: [/usr/share/datasets]\n"
                   "checkpoint_dir: " + dir_->path() + "\n");
  node_process node{dir_->path(), "n1", {"--config", yaml}};
  ASSERT_NE(node.port(), 0) << node.log();
  auto out = run_baton(with(transfer_job_on("n1", node.port()), tls("coordinator")));
  ASSERT_EQ(out.exit_code, 0) << out.text << "\nnode log:\n" << node.log();
  auto log = node.log();
  EXPECT_NE(log.find("listening on 127.0.0.1:" + std::to_string(node.port()) + " with TLS"),
            std::string::npos) << log;
  EXPECT_NE(log.find("peer authenticated as 'coordinator'"), std::string::npos) << log;
  EXPECT_NE(log.find("spawned source"), std::string::npos) << log;
  EXPECT_EQ(log.find("unrestricted"), std::string::npos) << log;
}

TEST_F(security, mutual_tls_over_local_nodes) {
  auto metrics = dir_->path() + "/local-nodes.json";
  auto args = transfer_job_on("n1", 1);
  args.resize(args.size() - 2); // no `nodes`: --local-nodes makes them
  auto out = run_baton(with(args, {"--local-nodes", "2", "--metrics-out", metrics, "--tls-cert",
                                   certs() + "/coordinator.pem", "--tls-key",
                                   certs() + "/coordinator.key", "--tls-ca",
                                   certs() + "/ca.pem"}));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_EQ(read_json(metrics).at("nodes").size(), 3u) << "2 nodes and the coordinator";
}

TEST_F(security, coordinator_without_certificate_is_refused) {
  node_process node{dir_->path(), "n1", tls("n1")};
  ASSERT_NE(node.port(), 0) << node.log();
  auto out = run_baton(transfer_job_on("n1", node.port()));
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("closed the connection during the handshake"), std::string::npos)
    << out.text;
  EXPECT_EQ(node.log().find("n1: spawned"), std::string::npos) << node.log();
}

TEST_F(security, certificate_from_another_ca_is_refused) {
  node_process node{dir_->path(), "n1", tls("n1")};
  ASSERT_NE(node.port(), 0) << node.log();
  auto out = run_baton(with(transfer_job_on("n1", node.port()), tls("coordinator", other())));
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("TLS connection to node 'n1'"), std::string::npos) << out.text;
  EXPECT_EQ(node.log().find("n1: spawned"), std::string::npos) << node.log();
}

TEST_F(security, plain_node_is_refused_by_a_tls_coordinator) {
  node_process node{dir_->path(), "n1", {}};
  ASSERT_NE(node.port(), 0) << node.log();
  auto out = run_baton(with(transfer_job_on("n1", node.port()), tls("coordinator")));
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_EQ(node.log().find("n1: spawned"), std::string::npos) << node.log();
}

// CAF accepts any certificate of the CA; the proof checks the node's name.
TEST_F(security, node_name_not_in_its_certificate_is_refused) {
  node_process node{dir_->path(), "n1", tls("n1")};
  ASSERT_NE(node.port(), 0) << node.log();
  auto out = run_baton(with(transfer_job_on("n2", node.port()), tls("coordinator")));
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("presented a certificate for 'n1', but the topology expects 'n2'"),
            std::string::npos)
    << out.text;
  EXPECT_EQ(node.log().find("n1: spawned"), std::string::npos) << node.log();
}

TEST_F(security, coordinator_not_in_allow_list_is_refused) {
  auto args = tls("n1");
  args.insert(args.end(), {"--tls-allow", "admin", "--tls-allow", "n2"});
  node_process node{dir_->path(), "n1", args};
  ASSERT_NE(node.port(), 0) << node.log();
  auto out = run_baton(with(transfer_job_on("n1", node.port()), tls("coordinator")));
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("does not accept the certificate for 'coordinator': not in its "
                          "tls.allow (admin, n2)"),
            std::string::npos)
    << out.text;
  auto log = node.log();
  EXPECT_NE(log.find("refused a peer's identity"), std::string::npos) << log;
  EXPECT_EQ(log.find("n1: spawned"), std::string::npos) << log;
}

// A client with a good certificate that skips the proof gets nothing spawned.
TEST_F(security, spawn_request_without_identity_proof_is_refused) {
  node_process node{dir_->path(), "n1", tls("n1")};
  ASSERT_NE(node.port(), 0) << node.log();
  client c{{certs() + "/coordinator.pem", certs() + "/coordinator.key", certs() + "/ca.pem"}};
  auto spawner = caf::openssl::remote_actor(*c.sys, "127.0.0.1", node.port());
  ASSERT_TRUE(spawner) << c.sys->render(spawner.error());
  auto err = c.spawn(*spawner, "source", synthetic_source_spec());
  EXPECT_NE(describe(err).find("has not proven its identity"), std::string::npos)
    << describe(err);
  EXPECT_EQ(node.log().find("n1: spawned"), std::string::npos) << node.log();
}

// -- what a node lets actors do ------------------------------------------------------

TEST_F(security, dataset_outside_data_dirs_is_refused) {
  fs::create_directories(dir_->path() + "/data");
  auto yaml = dir_->path() + "/paths-node.yaml";
  write_file(yaml, "data_dirs: [data]\n");
  node_process node{dir_->path(), "n1", {"--config", yaml}};
  ASSERT_NE(node.port(), 0) << node.log();
  auto out = run_baton(transfer_job_on("n1", node.port()));
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("dataset directory '/usr/share/datasets/fashion-mnist'"),
            std::string::npos)
    << out.text;
  EXPECT_NE(out.text.find("is outside the node's data_dirs (" + dir_->path() + "/data)"),
            std::string::npos)
    << out.text;
  auto log = node.log();
  EXPECT_NE(log.find("refused to spawn source"), std::string::npos) << log;
  EXPECT_EQ(log.find("spawned source"), std::string::npos) << log;
}

// Issue 32 item 3: the node checked the dataset directory only; a CIFAR
// batch or a class folder inside it that is a symlink out of data_dirs was
// read (the job trained with exit 0). Every file and folder a reader opens
// is now resolved and checked.
TEST_F(security, data_files_linked_out_of_data_dirs_are_refused) {
  scratch_dir scratch{"data-links"};
  const std::string d = scratch.path();
  fs::create_directories(d + "/data/cifar");
  fs::create_directories(d + "/outside");
  write_cifar10(d + "/data/cifar", make_samples(50, 3, 32, 32, 10, 1),
                make_samples(10, 3, 32, 32, 10, 2));
  fs::rename(d + "/data/cifar/data_batch_3.bin", d + "/outside/batch.bin");
  fs::create_symlink(d + "/outside/batch.bin", d + "/data/cifar/data_batch_3.bin");
  write_image_folder(d + "/data/images", 2, 2, 1);
  fs::rename(d + "/data/images/train/c1", d + "/outside/c1");
  fs::create_directory_symlink(d + "/outside/c1", d + "/data/images/train/c1");
  write_file(d + "/node.yaml", "data_dirs: [data]\n");
  node_process node{d, "n1", {"--config", d + "/node.yaml"}};
  ASSERT_NE(node.port(), 0) << node.log();
  auto job = [&](const std::string& name, const std::string& data) {
    const std::string path = d + "/" + name + ".yaml";
    write_file(path, "job: transfer\nseed: 42\n"
                     "nodes: [{name: n1, host: 127.0.0.1, port: " + std::to_string(node.port()) +
                       "}]\n"
                     "data:\n" + data + "  batch_size: 8\n  epochs: 1\n"
                     "backbone: {model: convnet, checkpoint: none, split: [pool1, pool2]}\n"
                     "tasks: [{name: all, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}]\n"
                     "heads: [{name: all, task: all}]\n");
    return run_baton({"run", path});
  };
  const std::string outside = "outside the node's data_dirs (" + d + "/data)";
  auto out = job("cifar", "  kind: cifar10\n  dir: " + d + "/data/cifar\n");
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(d + "/data/cifar/data_batch_3.bin: resolved to '" +
                          fs::canonical(d + "/outside/batch.bin").string() + "', " + outside),
            std::string::npos)
    << out.text;
  out = job("images", "  kind: image-folder\n  dir: " + d + "/data/images\n"
                      "  shape: [3, 8, 8]\n  classes: 10\n");
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(d + "/data/images/train/c1: resolved to"), std::string::npos)
    << out.text;
  EXPECT_NE(out.text.find(outside), std::string::npos) << out.text;
  EXPECT_EQ(node.log().find("spawned source"), std::string::npos) << node.log();
}

TEST_F(security, unknown_role_is_refused) {
  node_process node{dir_->path(), "n1", {}};
  ASSERT_NE(node.port(), 0) << node.log();
  client c;
  auto spawner = c.sys->middleman().remote_actor("127.0.0.1", node.port());
  ASSERT_TRUE(spawner) << c.sys->render(spawner.error());
  auto err = c.spawn(*spawner, "shell", "command: rm -rf /");
  EXPECT_EQ(err, errc::unknown_actor_type) << describe(err);
  // Every mode's roles are registered; the list starts with the shared source.
  EXPECT_NE(describe(err).find("node n1 has no actor type 'shell' (registered: source, "),
            std::string::npos)
    << describe(err);
  // The node still serves registered roles.
  EXPECT_FALSE(c.spawn(*spawner, "source", synthetic_source_spec()));
  EXPECT_NE(node.log().find("refused to spawn shell"), std::string::npos) << node.log();
}

TEST_F(security, paths_symlinks_and_dot_dot_cannot_leave_the_roots) {
  scratch_dir scratch{"paths"};
  const auto& dir = scratch.path();
  fs::create_directories(dir + "/checkpoints/sub");
  fs::create_directories(dir + "/outside");
  write_file(dir + "/outside/model.pt", "x");
  fs::create_directory_symlink(dir + "/outside", dir + "/checkpoints/link");
  actors::path_roots roots{{dir + "/data"}, dir + "/checkpoints"};
  auto stage_with = [](const std::string& checkpoint) {
    actors::transfer::stage_settings spec;
    spec.checkpoint = checkpoint;
    return spec;
  };
  EXPECT_FALSE(check_paths(stage_with(dir + "/checkpoints/sub/model.pt"), roots));
  EXPECT_FALSE(check_paths(stage_with(""), roots)) << "no checkpoint reads no file";
  for (auto bad : {dir + "/checkpoints/link/model.pt", dir + "/checkpoints/../outside/model.pt",
                   dir + "/checkpoints-other/model.pt", std::string{"/etc/passwd"}}) {
    auto err = check_paths(stage_with(bad), roots);
    EXPECT_NE(describe(err).find("outside the node's checkpoint_dir"), std::string::npos)
      << bad << ": " << describe(err);
  }
  actors::pipeline::stage_settings script;
  script.backbone.name = "torchscript";
  script.backbone.path = dir + "/outside/model.pt";
  EXPECT_NE(describe(check_paths(script, roots)).find("TorchScript file"), std::string::npos);
  actors::transfer::head_settings head; // writes and restores checkpoints there
  head.recovery.checkpoint_dir = dir + "/outside/head";
  EXPECT_NE(describe(check_paths(head, roots)).find("checkpoint directory"), std::string::npos);
  head.recovery.checkpoint_dir = dir + "/checkpoints/run-1/head";
  EXPECT_FALSE(check_paths(head, roots));
  actors::source_settings source;
  source.data.path = dir + "/data/../outside";
  EXPECT_TRUE(check_paths(source, roots));
  source.data.kind = "synthetic";
  EXPECT_FALSE(check_paths(source, roots)) << "synthetic data reads no directory";
  EXPECT_FALSE(check_paths(stage_with("/etc/passwd"), {})) << "no roots: unrestricted";
  // Issue 32 item 3: a data-parallel worker's and shard's TorchScript model
  // was loaded from anywhere.
  client c;
  actors::data_parallel::worker_settings worker;
  worker.model.name = "torchscript";
  worker.model.path = dir + "/checkpoints/link/model.pt";
  worker.task = model::make_task("all", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  worker.data.data.kind = "synthetic";
  const std::string worker_yaml = actors::data_parallel::to_yaml(worker);
  auto spawned = actors::data_parallel::spawn_worker_role(
    *c.sys, {"w0", "n1", worker_yaml, roots});
  ASSERT_FALSE(spawned);
  EXPECT_NE(describe(spawned.error()).find("TorchScript file '" + worker.model.path +
                                           "' (resolved: '" +
                                           fs::canonical(dir + "/outside/model.pt").string() +
                                           "') is outside the node's checkpoint_dir"),
            std::string::npos)
    << describe(spawned.error());
  actors::data_parallel::shard_settings shard;
  shard.model = worker.model;
  shard.data.data.kind = "synthetic";
  const std::string shard_yaml = actors::data_parallel::to_yaml(shard);
  auto shard_spawned = actors::data_parallel::spawn_shard_role(
    *c.sys, {"s0", "n1", shard_yaml, roots});
  ASSERT_FALSE(shard_spawned);
  EXPECT_NE(describe(shard_spawned.error()).find("TorchScript file"), std::string::npos)
    << describe(shard_spawned.error());
}
