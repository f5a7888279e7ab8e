// Who a `baton launch` process is: Slurm node lists, hostfiles and the
// order in which flags and the launchers' variables are read.

#include <gtest/gtest.h>

#include "actors/runtime/launch_env.hpp"
#include "messages/errc.hpp"

using namespace baton;
using namespace baton::actors;

namespace {

using strings = std::vector<std::string>;
using environment = std::map<std::string, std::string>;

strings expanded(const std::string& list) {
  auto hosts = expand_nodelist(list);
  EXPECT_TRUE(hosts) << describe(hosts.error());
  return hosts ? *hosts : strings{};
}

std::string refusal_of_list(const std::string& list) {
  auto hosts = expand_nodelist(list);
  EXPECT_FALSE(hosts) << list << " was accepted";
  return hosts ? std::string{} : context_of(hosts.error());
}

launch_identity resolved(const environment& env, const launch_flags& flags = {},
                         const std::vector<hostfile_entry>& hosts = {},
                         const std::string& hostname = "h1") {
  auto id = resolve_launch(flags, env, hosts, hostname);
  EXPECT_TRUE(id) << describe(id.error());
  return id ? *id : launch_identity{};
}

std::string refusal(const environment& env, const launch_flags& flags = {},
                    const std::vector<hostfile_entry>& hosts = {}) {
  auto id = resolve_launch(flags, env, hosts, "h1");
  EXPECT_FALSE(id) << "resolved as " << (id ? id->origin : "");
  EXPECT_TRUE(id || id.error() == errc::bad_config);
  return id ? std::string{} : context_of(id.error());
}

} // namespace

// -- node lists (what `scontrol show hostnames` prints) ------------------------

TEST(launch_env, node_lists_expand_as_scontrol_show_hostnames) {
  EXPECT_EQ(expanded("localhost"), strings{"localhost"});
  EXPECT_EQ(expanded("n[01-03,07],gpu5"), (strings{"n01", "n02", "n03", "n07", "gpu5"}));
  EXPECT_EQ(expanded("a1,b[8-11]"), (strings{"a1", "b8", "b9", "b10", "b11"}));
  EXPECT_EQ(expanded("n[098-101]"), (strings{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expanded("r[1-2]-n[1-2]"), (strings{"r1-n1", "r1-n2", "r2-n1", "r2-n2"}));
  EXPECT_EQ(expanded("gpu[3]x"), strings{"gpu3x"});
}

TEST(launch_env, malformed_node_lists_are_refused_with_the_reason) {
  EXPECT_NE(refusal_of_list("n[1-3").find("'[' without its ']'"), std::string::npos);
  EXPECT_NE(refusal_of_list("n1-3]").find("']' without '['"), std::string::npos);
  EXPECT_NE(refusal_of_list("n[3-1]").find("runs backwards"), std::string::npos);
  EXPECT_NE(refusal_of_list("n[a-b]").find("expected numbers or ranges"), std::string::npos);
  EXPECT_NE(refusal_of_list("n1,,n2").find("empty host name"), std::string::npos);
  EXPECT_NE(refusal_of_list("n[0-99999999]").find("more than 65536 hosts"), std::string::npos);
  EXPECT_NE(refusal_of_list("a[0-999]b[0-999]").find("more than 65536 hosts"), std::string::npos);
}

// -- hostfiles -------------------------------------------------------------------

TEST(launch_env, hostfiles_read_hosts_and_slots) {
  auto hosts = parse_hostfile("# the cluster\nworker-1 slots=2\n\nworker-2   # one slot\n"
                              "worker-3 slots=1 max_slots=4\n",
                              "hosts.txt");
  ASSERT_TRUE(hosts) << describe(hosts.error());
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].host, "worker-1");
  EXPECT_EQ((*hosts)[0].slots, 2);
  EXPECT_EQ((*hosts)[1].host, "worker-2");
  EXPECT_EQ((*hosts)[1].slots, 1);
  EXPECT_EQ((*hosts)[2].slots, 1);
}

TEST(launch_env, hostfile_errors_name_the_file_and_line) {
  auto bad = parse_hostfile("a slots=2\nb slots=zero\n", "hosts.txt");
  ASSERT_FALSE(bad);
  EXPECT_NE(context_of(bad.error()).find("hosts.txt:2: expected `host` or `host slots=N`"),
            std::string::npos)
    << context_of(bad.error());
  auto zero = parse_hostfile("a slots=0\n", "hosts.txt");
  ASSERT_FALSE(zero);
  EXPECT_NE(context_of(zero.error()).find("hosts.txt:1:"), std::string::npos);
  auto empty = parse_hostfile("# nothing\n", "hosts.txt");
  ASSERT_FALSE(empty);
  EXPECT_NE(context_of(empty.error()).find("no hosts"), std::string::npos);
  EXPECT_FALSE(load_hostfile("/nonexistent/hosts.txt"));
}

// -- resolution: flags, torchrun, Open MPI, Slurm, hostfile ----------------------

TEST(launch_env, torchrun_variables_give_rank_world_and_master) {
  auto id = resolved({{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "10.0.0.1"},
                      {"MASTER_PORT", "29500"}, {"LOCAL_RANK", "2"}});
  EXPECT_EQ(id.rank, 2);
  EXPECT_EQ(id.world_size, 3);
  EXPECT_EQ(id.master_addr, "10.0.0.1");
  EXPECT_EQ(id.launcher_port, 29500);
  // Never the launcher's own port: torchrun's store listens there.
  EXPECT_EQ(id.rendezvous_port, 29501);
  EXPECT_EQ(id.origin, "rank 2 of 3 (RANK, WORLD_SIZE); rank 0 at 10.0.0.1:29501 "
                       "(MASTER_ADDR, MASTER_PORT + 1); no job id: rank 0 cannot tell this "
                       "job's ranks from another's on its port; give --job-id");
}

TEST(launch_env, the_rendezvous_port_is_never_master_port) {
  auto last = resolved({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"},
                        {"MASTER_PORT", "65535"}});
  EXPECT_EQ(last.launcher_port, 65535);
  EXPECT_EQ(last.rendezvous_port, 65534);
  launch_flags flags;
  flags.rendezvous_port = 4000;
  auto chosen = resolved({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"},
                          {"MASTER_PORT", "29500"}},
                         flags);
  EXPECT_EQ(chosen.rendezvous_port, 4000);
  EXPECT_EQ(chosen.launcher_port, 29500);
}

TEST(launch_env, slurm_variables_give_rank_world_and_the_first_host) {
  auto id = resolved({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"},
                      {"SLURM_JOB_NODELIST", "gpu[07-08],cpu1"}, {"SLURM_JOB_ID", "123456"}});
  EXPECT_EQ(id.rank, 1);
  EXPECT_EQ(id.world_size, 4);
  EXPECT_EQ(id.master_addr, "gpu07");
  EXPECT_EQ(id.launcher_port, -1);
  EXPECT_EQ(id.rendezvous_port, 20000 + 123456 % 20000);
}

TEST(launch_env, open_mpi_variables_give_rank_and_world) {
  launch_flags flags;
  flags.master_addr = "head";
  auto id = resolved({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "5"}}, flags);
  EXPECT_EQ(id.rank, 3);
  EXPECT_EQ(id.world_size, 5);
  EXPECT_EQ(id.master_addr, "head");
  EXPECT_EQ(id.rendezvous_port, default_rendezvous_port);
}

// torchrun under srun: torchrun's variables describe the worker, Slurm's the
// torchrun process; flags beat both.
TEST(launch_env, flags_then_torchrun_then_open_mpi_then_slurm) {
  environment all{{"RANK", "1"},           {"WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "m"},     {"OMPI_COMM_WORLD_RANK", "4"},
                  {"OMPI_COMM_WORLD_SIZE", "6"}, {"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "8"},    {"SLURM_JOB_NODELIST", "s[1-8]"}};
  auto torchrun = resolved(all);
  EXPECT_EQ(torchrun.rank, 1);
  EXPECT_EQ(torchrun.world_size, 2);
  EXPECT_EQ(torchrun.master_addr, "m");
  all.erase("RANK");
  all.erase("WORLD_SIZE");
  all.erase("MASTER_ADDR");
  auto mpi = resolved(all);
  EXPECT_EQ(mpi.rank, 4);
  EXPECT_EQ(mpi.world_size, 6);
  EXPECT_EQ(mpi.master_addr, "s1");
  all.erase("OMPI_COMM_WORLD_RANK");
  all.erase("OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(resolved(all).rank, 0);
  EXPECT_EQ(resolved(all).world_size, 8);
  launch_flags flags;
  flags.rank = 5;
  flags.master_addr = "chosen";
  flags.rendezvous_port = 4000;
  auto flagged = resolved(all, flags);
  EXPECT_EQ(flagged.rank, 5);
  EXPECT_EQ(flagged.world_size, 8);
  EXPECT_EQ(flagged.master_addr, "chosen");
  EXPECT_EQ(flagged.rendezvous_port, 4000);
}

TEST(launch_env, a_hostfile_gives_world_master_and_this_hosts_rank) {
  std::vector<hostfile_entry> hosts{{"h0", 1}, {"h1.cluster", 2}, {"h2", 1}};
  launch_flags flags;
  flags.hostfile = "hosts.txt";
  auto first = resolved({{"LOCAL_RANK", "1"}}, flags, hosts, "h1");
  EXPECT_EQ(first.world_size, 4);
  EXPECT_EQ(first.master_addr, "h0");
  EXPECT_EQ(first.rank, 2); // h0's slot, then h1's second slot
  EXPECT_EQ(resolved({}, flags, hosts, "h2.cluster").rank, 3);
  // A host of several slots needs its local rank: the error names LOCAL_RANK
  // (issue 32, item 22).
  auto no_local = resolve_launch(flags, {}, hosts, "h1");
  ASSERT_FALSE(no_local);
  EXPECT_NE(context_of(no_local.error()).find("the hostfile's line of h1.cluster has 2 slots, "
                                              "and nothing says which one this process is: "
                                              "set LOCAL_RANK"),
            std::string::npos)
    << context_of(no_local.error());
}

// Issue 32, item 9: the job id keeps two jobs on one rendezvous port apart.
TEST(launch_env, the_job_id_comes_from_the_flag_torchrun_or_slurm) {
  const environment torchrun{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"},
                             {"TORCHELASTIC_RUN_ID", "run-7"}, {"SLURM_JOB_ID", "99"}};
  EXPECT_EQ(resolved(torchrun).job_id, "run-7");
  EXPECT_NE(resolved(torchrun).origin.find("job run-7 (TORCHELASTIC_RUN_ID)"), std::string::npos);
  launch_flags flags;
  flags.job_id = "mine";
  EXPECT_EQ(resolved(torchrun, flags).job_id, "mine");
  // torchrun's default run id, "none", is no id.
  EXPECT_EQ(resolved({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"},
                      {"TORCHELASTIC_RUN_ID", "none"}, {"SLURM_JOB_ID", "99"}})
              .job_id,
            "99");
  auto none = resolved({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"}});
  EXPECT_EQ(none.job_id, "");
  EXPECT_NE(none.origin.find("no job id"), std::string::npos) << none.origin;
  flags.job_id = "two words";
  EXPECT_NE(refusal(torchrun, flags).find("--job-id is 'two words': expected printable "
                                          "characters without spaces"),
            std::string::npos);
}

// Issue 32, item 19: the variables that say a launcher started several
// copies of this process.
TEST(launch_env, launched_copies_are_told_by_the_launchers_variables) {
  EXPECT_EQ(launched_copies({{"RANK", "1"}, {"WORLD_SIZE", "3"}}), "WORLD_SIZE=3");
  EXPECT_EQ(launched_copies({{"OMPI_COMM_WORLD_SIZE", "2"}}), "OMPI_COMM_WORLD_SIZE=2");
  EXPECT_EQ(launched_copies({{"SLURM_STEP_NUM_TASKS", "4"}}), "SLURM_STEP_NUM_TASKS=4");
  EXPECT_EQ(launched_copies({{"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}}), "SLURM_NTASKS=2");
  EXPECT_EQ(launched_copies({{"WORLD_SIZE", "1"}}), "");
  EXPECT_EQ(launched_copies({{"SLURM_NTASKS", "4"}, {"SLURM_JOB_ID", "7"}}), "")
    << "sbatch's script runs once";
  EXPECT_EQ(launched_copies({}), "");
}

TEST(launch_env, missing_values_name_every_place_they_may_come_from) {
  auto no_world = refusal({});
  EXPECT_NE(no_world.find("the world size is not known: set one of --world-size, WORLD_SIZE"),
            std::string::npos)
    << no_world;
  auto no_rank = refusal({{"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"}});
  EXPECT_NE(no_rank.find("this process's rank is not known"), std::string::npos) << no_rank;
  EXPECT_NE(no_rank.find("SLURM_PROCID"), std::string::npos) << no_rank;
  auto no_master = refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(no_master.find("rank 0's host is not known"), std::string::npos) << no_master;
}

TEST(launch_env, bad_and_contradictory_values_are_refused) {
  auto past = refusal({{"RANK", "3"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "m"}});
  EXPECT_NE(past.find("RANK is '3': expected an integer from 0 to 2"), std::string::npos) << past;
  auto text = refusal({{"RANK", "one"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "m"}});
  EXPECT_NE(text.find("RANK is 'one'"), std::string::npos) << text;
  auto port = refusal({{"RANK", "0"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "m"},
                       {"MASTER_PORT", "http"}});
  EXPECT_NE(port.find("MASTER_PORT is 'http'"), std::string::npos) << port;
  launch_flags flags;
  flags.rendezvous_port = 29500;
  auto same = refusal({{"RANK", "0"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "m"},
                       {"MASTER_PORT", "29500"}},
                      flags);
  EXPECT_NE(same.find("the launcher's own MASTER_PORT"), std::string::npos) << same;
  auto slots = refusal({{"RANK", "0"}, {"WORLD_SIZE", "3"}}, {}, {{"h0", 2}, {"h1", 2}});
  EXPECT_NE(slots.find("WORLD_SIZE says 3 processes but the hostfile has 4 slots"),
            std::string::npos)
    << slots;
  auto list = refusal({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                       {"SLURM_JOB_NODELIST", "n[1-"}});
  EXPECT_NE(list.find("SLURM_JOB_NODELIST: node list 'n[1-'"), std::string::npos) << list;
}

TEST(launch_env, one_process_needs_no_master) {
  launch_flags flags;
  flags.rank = 0;
  flags.world_size = 1;
  EXPECT_EQ(resolved({}, flags).master_addr, "127.0.0.1");
}
