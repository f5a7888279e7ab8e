#include "actors/modes/one_task.hpp"

#include <string>
#include <vector>

namespace baton::actors {
inline namespace modes {

using namespace detail;

void add_one_task_heads(job_schema& schema) {
  schema.keys[""].push_back("heads");
  schema.keys["heads.*"] = {"name", "task", "node", "optimizer"};
  schema.keys["heads.*.optimizer"] = optimizer_keys();
  schema.lists.push_back("heads");
}

void read_one_task_heads(const field& root, topology& t) {
  std::optional<field> heads = root.get("heads");
  if (!heads || heads->is_null())
    return;
  if (root.get("task"))
    heads->fail("'heads' names the task of job: " + t.job + " in files written before 'task:'; "
                "give 'task' only");
  std::vector<field> items = heads->items("a list of heads ({name, task}) naming the task");
  if (items.empty())
    heads->fail(heads->name() + " must list at least one head");
  unique_names names("head");
  for (const field& item : items) {
    check_section(item);
    field name = item.require("name");
    names.add(name, read_new_name(name, "head"));
    read_task(item.require("task"), t);
  }
  if (root.section("backbone").section("pretrain").get("task"))
    return; // files that named both trained backbone.pretrain.task, as they still do
  t.task = read_task(items.front().require("task"), t).name;
  t.pretrain.task = t.task;
}

} // namespace modes
} // namespace baton::actors
