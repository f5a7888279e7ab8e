#include "actors/runtime/launch_env.hpp"

#include <cctype>
#include <limits>
#include <sstream>

#include "actors/config/yaml_field.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

// -- node lists -----------------------------------------------------------------

caf::error bad_list(const std::string& list, const std::string& why) {
  return make_error(errc::bad_config, "node list '" + list + "': " + why);
}

/// Splits `text` at the commas outside brackets.
std::vector<std::string> split_top_level(const std::string& text) {
  std::vector<std::string> out{""};
  int depth = 0;
  for (char c : text) {
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (c == ',' && depth == 0)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 9)
    return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  return true;
}

/// The values of one bracket group's body, "01-03,07": zero padded to the
/// width of each range's first number, as Slurm prints them.
caf::expected<std::vector<std::string>> expand_ranges(const std::string& body,
                                                      const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in{body};
  for (std::string range; std::getline(in, range, ',');) {
    auto dash = range.find('-');
    std::string low = range.substr(0, dash);
    std::string high = dash == std::string::npos ? low : range.substr(dash + 1);
    if (!all_digits(low) || !all_digits(high))
      return bad_list(list, "expected numbers or ranges such as 01-03 in brackets, got '" +
                              range + "'");
    long first = std::stol(low), last = std::stol(high);
    if (last < first)
      return bad_list(list, "the range '" + range + "' runs backwards");
    if (static_cast<size_t>(last - first) + out.size() >= max_launch_hosts)
      return bad_list(list, "more than " + std::to_string(max_launch_hosts) + " hosts");
    for (long v = first; v <= last; ++v) {
      auto digits = std::to_string(v);
      out.push_back(std::string(low.size() > digits.size() ? low.size() - digits.size() : 0, '0')
                    + digits);
    }
  }
  return out;
}

/// Appends the hosts of one name with bracket groups, `r[1-2]-n[01-02]`.
caf::error expand_name(const std::string& name, const std::string& list,
                       std::vector<std::string>& out) {
  auto open = name.find('[');
  if (open == std::string::npos) {
    if (name.find(']') != std::string::npos)
      return bad_list(list, "']' without '[' in '" + name + "'");
    out.push_back(name);
    return caf::none;
  }
  auto close = name.find(']', open);
  if (close == std::string::npos || name.find('[', open + 1) < close)
    return bad_list(list, "'[' without its ']' in '" + name + "'");
  auto values = expand_ranges(name.substr(open + 1, close - open - 1), list);
  if (!values)
    return values.error();
  for (const auto& v : *values) {
    if (auto err = expand_name(name.substr(0, open) + v + name.substr(close + 1), list, out))
      return err;
    if (out.size() > max_launch_hosts)
      return bad_list(list, "more than " + std::to_string(max_launch_hosts) + " hosts");
  }
  return caf::none;
}

// -- hostfiles ------------------------------------------------------------------

/// One line of a hostfile, its comment removed; nothing for a blank line.
caf::expected<std::optional<hostfile_entry>> parse_hostfile_line(std::string line,
                                                                 const std::string& where) {
  line = line.substr(0, line.find('#'));
  std::stringstream in{line};
  hostfile_entry entry;
  if (!(in >> entry.host))
    return std::optional<hostfile_entry>{};
  for (std::string word; in >> word;) {
    auto eq = word.find('=');
    auto key = word.substr(0, eq);
    auto value = eq == std::string::npos ? std::string{} : word.substr(eq + 1);
    bool number = all_digits(value) && std::stol(value) > 0;
    if (key == "slots" && number)
      entry.slots = static_cast<int32_t>(std::stol(value));
    else if ((key != "max_slots" && key != "max-slots") || !number)
      return make_error(errc::bad_config, where + ": expected `host` or `host slots=N` (N from "
                                          "1), got '" + word + "'");
  }
  return std::optional<hostfile_entry>{entry};
}

// -- resolution -----------------------------------------------------------------

/// A value and the name of the flag or variable it came from.
struct sourced {
  std::string value;
  std::string from;
};

using environment = std::map<std::string, std::string>;

/// The first of `names` that is set in `env` (and not empty).
std::optional<sourced> first_set(const environment& env, const std::vector<std::string>& names) {
  for (const auto& name : names)
    if (auto it = env.find(name); it != env.end() && !it->second.empty())
      return sourced{it->second, name};
  return std::nullopt;
}

caf::expected<int64_t> integer_of(const sourced& s, int64_t min, int64_t max) {
  bool negative = !s.value.empty() && s.value[0] == '-';
  std::string digits = negative ? s.value.substr(1) : s.value;
  int64_t v = all_digits(digits) ? std::stol(digits) * (negative ? -1 : 1) : min - 1;
  if (v < min || v > max)
    return make_error(errc::bad_config, s.from + " is '" + s.value + "': expected an integer "
                                        "from " + std::to_string(min) + " to " +
                                        std::to_string(max));
  return v;
}

bool same_host(const std::string& entry, const std::string& hostname) {
  auto label = [](const std::string& h) { return h.substr(0, h.find('.')); };
  return entry == hostname || label(entry) == label(hostname);
}

/// The rank a hostfile gives this host: the slots of the lines before its
/// line, plus its local rank on a host of several slots; nothing when no
/// line is this host's; errc::bad_config when its line has several slots
/// and nothing says which one this process is.
caf::expected<std::optional<sourced>> hostfile_rank(const std::vector<hostfile_entry>& hosts,
                                                    const std::string& hostname,
                                                    const environment& env) {
  int64_t before = 0;
  for (const auto& h : hosts) {
    if (same_host(h.host, hostname)) {
      auto local = first_set(env, {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"});
      if (h.slots > 1 && !local)
        return make_error(errc::bad_config,
                          "baton launch: the hostfile's line of " + h.host + " has " +
                            std::to_string(h.slots) + " slots, and nothing says which one this "
                            "process is: set LOCAL_RANK (0 to " + std::to_string(h.slots - 1) +
                            ", as torchrun does; or OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID), "
                            "or give --rank (see docs/running-on-a-cluster.md)");
      if (h.slots > 1 && !all_digits(local->value))
        return std::optional<sourced>{local}; // refused as not a number by the caller
      int64_t offset = h.slots > 1 ? std::stol(local->value) : 0;
      return std::optional<sourced>{
        sourced{std::to_string(before + offset),
                "the hostfile's line of " + hostname + (h.slots > 1 ? " + " + local->from : "")}};
    }
    before += h.slots;
  }
  return std::optional<sourced>{};
}

int64_t slots_of(const std::vector<hostfile_entry>& hosts) {
  int64_t sum = 0;
  for (const auto& h : hosts)
    sum += h.slots;
  return sum;
}

caf::error missing(const std::string& what, const std::string& sources) {
  return make_error(errc::bad_config, "baton launch: " + what + " is not known: set one of " +
                                        sources + " (see docs/running-on-a-cluster.md)");
}

/// The rank and world size, each from the first source that has it.
caf::error resolve_rank(const launch_flags& flags, const environment& env,
                        const std::vector<hostfile_entry>& hosts, const std::string& hostname,
                        launch_identity& id, std::string& from) {
  auto size = flags.world_size ? sourced{std::to_string(*flags.world_size), "--world-size"}
                               : first_set(env, {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                                 "SLURM_NTASKS"})
                                   .value_or(hosts.empty() ? sourced{}
                                                           : sourced{std::to_string(slots_of(hosts)),
                                                                     "the hostfile's slots"});
  if (size.from.empty())
    return missing("the world size", "--world-size, WORLD_SIZE (torchrun, PyTorchJob), "
                                     "OMPI_COMM_WORLD_SIZE (Open MPI), SLURM_NTASKS (Slurm) or "
                                     "--hostfile");
  auto world = integer_of(size, 1, static_cast<int64_t>(max_launch_hosts));
  if (!world)
    return world.error();
  if (!hosts.empty() && slots_of(hosts) != *world)
    return make_error(errc::bad_config, "baton launch: " + size.from + " says " +
                                          std::to_string(*world) + " processes but the hostfile "
                                          "has " + std::to_string(slots_of(hosts)) + " slots");
  auto rank = flags.rank ? sourced{std::to_string(*flags.rank), "--rank"}
                         : first_set(env, {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"})
                             .value_or(sourced{});
  if (rank.from.empty()) {
    auto from_hostfile = hostfile_rank(hosts, hostname, env);
    if (!from_hostfile)
      return from_hostfile.error();
    rank = from_hostfile->value_or(sourced{});
  }
  if (rank.from.empty())
    return missing("this process's rank", "--rank, RANK (torchrun, PyTorchJob), "
                                          "OMPI_COMM_WORLD_RANK (Open MPI), SLURM_PROCID (Slurm), "
                                          "or a --hostfile line for this host (" + hostname + ")");
  auto r = integer_of(rank, 0, *world - 1);
  if (!r)
    return make_error(errc::bad_config, "baton launch: " + context_of(r.error()) + " (a rank "
                                          "of " + std::to_string(*world) + " processes, from " +
                                          size.from + ")");
  id.rank = static_cast<int32_t>(*r);
  id.world_size = static_cast<int32_t>(*world);
  from = rank.from + ", " + size.from;
  return caf::none;
}

/// Rank 0's host and the rendezvous port.
caf::error resolve_master(const launch_flags& flags, const environment& env,
                          const std::vector<hostfile_entry>& hosts, launch_identity& id,
                          std::string& from) {
  auto addr = !flags.master_addr.empty() ? sourced{flags.master_addr, "--master-addr"}
                                         : first_set(env, {"MASTER_ADDR"}).value_or(sourced{});
  if (addr.from.empty())
    if (auto list = first_set(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"})) {
      auto expanded = expand_nodelist(list->value);
      if (!expanded)
        return make_error(errc::bad_config, list->from + ": " + context_of(expanded.error()));
      addr = sourced{expanded->front(), "the first host of " + list->from};
    }
  if (addr.from.empty() && !hosts.empty())
    addr = sourced{hosts.front().host, "the hostfile's first host"};
  if (addr.from.empty() && id.world_size == 1)
    addr = sourced{"127.0.0.1", "one process"};
  if (addr.from.empty())
    return missing("rank 0's host", "--master-addr, MASTER_ADDR (torchrun, PyTorchJob), "
                                    "SLURM_JOB_NODELIST (Slurm) or --hostfile");
  id.master_addr = addr.value;
  std::string port_from;
  if (auto port = first_set(env, {"MASTER_PORT"})) {
    auto p = integer_of(*port, 1, 65535);
    if (!p)
      return p.error();
    id.launcher_port = static_cast<int32_t>(*p);
    // The next port, never MASTER_PORT itself (the launcher's store is there).
    bool last = *p == 65535;
    id.rendezvous_port = static_cast<uint16_t>(last ? *p - 1 : *p + 1);
    port_from = last ? "MASTER_PORT - 1" : "MASTER_PORT + 1";
  } else if (auto job = first_set(env, {"SLURM_JOB_ID", "SLURM_JOBID"})) {
    auto j = integer_of(*job, 0, std::numeric_limits<int32_t>::max());
    if (!j)
      return j.error();
    id.rendezvous_port = static_cast<uint16_t>(20000 + *j % 20000);
    port_from = "20000 + " + job->from + " % 20000";
  } else {
    id.rendezvous_port = default_rendezvous_port;
    port_from = "the default";
  }
  if (flags.rendezvous_port) {
    id.rendezvous_port = *flags.rendezvous_port;
    port_from = "--rendezvous-port";
  }
  if (static_cast<int32_t>(id.rendezvous_port) == id.launcher_port)
    return make_error(errc::bad_config, "baton launch: --rendezvous-port " +
                                          std::to_string(id.rendezvous_port) + " is the "
                                          "launcher's own MASTER_PORT, where torchrun's store "
                                          "listens: choose another");
  from = addr.from + ", " + port_from;
  return caf::none;
}

/// The job id, from the first place that has one.
caf::error resolve_job(const launch_flags& flags, const environment& env, launch_identity& id,
                       std::string& from) {
  // torchrun's run id is "none" unless --rdzv-id (or --standalone) sets one.
  environment named = env;
  if (auto it = named.find("TORCHELASTIC_RUN_ID"); it != named.end() && it->second == "none")
    named.erase(it);
  auto job = !flags.job_id.empty()
               ? sourced{flags.job_id, "--job-id"}
               : first_set(named, {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_JOBID"})
                   .value_or(sourced{});
  if (job.from.empty()) {
    from = "no job id: rank 0 cannot tell this job's ranks from another's on its port; give "
           "--job-id";
    return caf::none;
  }
  if (auto why = check_job_id(job.value); !why.empty())
    return make_error(errc::bad_config, "baton launch: " + job.from + " is '" +
                                          job.value.substr(0, 40) + "': " + why);
  id.job_id = job.value;
  from = "job " + job.value + " (" + job.from + ")";
  return caf::none;
}

/// The value of the first of `names` set in `env` as a number, or 0.
int64_t count_of(const environment& env, const std::vector<std::string>& names,
                 std::string& which) {
  auto set = first_set(env, names);
  if (!set || !all_digits(set->value))
    return 0;
  which = set->from + "=" + set->value;
  return std::stol(set->value);
}

} // namespace

std::string check_job_id(const std::string& id) {
  if (id.empty() || id.size() > max_job_id)
    return "expected 1 to " + std::to_string(max_job_id) + " characters";
  for (char c : id)
    if (!std::isgraph(static_cast<unsigned char>(c)))
      return "expected printable characters without spaces";
  return {};
}

std::string launched_copies(const environment& env) {
  std::string which;
  if (count_of(env, {"WORLD_SIZE"}, which) > 1 ||
      count_of(env, {"OMPI_COMM_WORLD_SIZE"}, which) > 1 ||
      count_of(env, {"SLURM_STEP_NUM_TASKS"}, which) > 1)
    return which;
  // sbatch's script sees SLURM_NTASKS of the allocation and runs once; the
  // tasks of an srun step have a step id.
  if (first_set(env, {"SLURM_STEP_ID", "SLURM_STEPID"}) &&
      count_of(env, {"SLURM_NTASKS"}, which) > 1)
    return which;
  return {};
}

caf::expected<std::vector<std::string>> expand_nodelist(const std::string& list) {
  std::vector<std::string> out;
  for (const auto& name : split_top_level(list)) {
    if (name.empty())
      return bad_list(list, "an empty host name");
    if (auto err = expand_name(name, list, out))
      return err;
  }
  return out;
}

caf::expected<std::vector<hostfile_entry>> parse_hostfile(const std::string& text,
                                                          const std::string& path) {
  std::vector<hostfile_entry> out;
  std::stringstream in{text};
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    auto entry = parse_hostfile_line(line, path + ":" + std::to_string(++line_number));
    if (!entry)
      return entry.error();
    if (*entry)
      out.push_back(**entry);
    if (out.size() > max_launch_hosts)
      return make_error(errc::bad_config, path + ": more than " +
                                            std::to_string(max_launch_hosts) + " hosts");
  }
  if (out.empty())
    return make_error(errc::bad_config, path + ": no hosts (expected `host slots=N` lines)");
  return out;
}

caf::expected<std::vector<hostfile_entry>> load_hostfile(const std::string& path) {
  std::string text;
  if (std::string why = detail::read_config_file(path, text); !why.empty())
    return make_error(errc::bad_config, "cannot read hostfile '" + path + "': " + why);
  return parse_hostfile(text, path);
}

caf::expected<launch_identity> resolve_launch(const launch_flags& flags, const environment& env,
                                              const std::vector<hostfile_entry>& hosts,
                                              const std::string& hostname) {
  launch_identity id;
  std::string rank_from, master_from, job_from;
  if (auto err = resolve_rank(flags, env, hosts, hostname, id, rank_from))
    return err;
  if (auto err = resolve_master(flags, env, hosts, id, master_from))
    return err;
  if (auto err = resolve_job(flags, env, id, job_from))
    return err;
  id.origin = "rank " + std::to_string(id.rank) + " of " + std::to_string(id.world_size) + " (" +
              rank_from + "); rank 0 at " + id.master_addr + ":" +
              std::to_string(id.rendezvous_port) + " (" + master_from + "); " + job_from;
  return id;
}

} // namespace runtime
} // namespace baton::actors
