// `--save-model FILE` in plain PyTorch (issue 23 item 3, docs/exporting.md):
// for every strategy the real `baton run ... --save-model F --metrics-out M`
// trains a tiny job, then Debian's python3-torch loads F with torch.jit.load
// and, on the test split baton evaluated (read here as baton's source reads
// it, written for Python as raw float32), counts the correct predictions of
// every output and hashes its weights. Both must equal baton's own: the
// count is the final test accuracy of the metrics x the split's size, the
// hash each result row's weights digest (SHA-256 of the parameters' bytes in
// order). So the module holds exactly the trained weights and computes
// exactly baton's predictions on every test sample that baton scored. The
// module carries the data's normalisation: fed the IDX file's own uint8
// images (Fashion-MNIST jobs), it predicts the same.
// Runs of --mode local save the same way: each mode's one-process reference
// is checked beside its actors.

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "actors/modes/registry.hpp"
#include "actors/runtime/local_run.hpp"
#include "model/core/task.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/python_torch.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;
using nlohmann::json;

namespace {

/// For each pair of arguments MODEL SPEC (one Python process for a test
/// case's models: importing torch costs ~2 s of CPU): reads the test split
/// (raw float32 [N, ...] and its shape) and, for every output of the module,
/// its labels, the batch size baton evaluates in (IST normalises with the
/// batch's statistics) and whose parameters make the digest: "" all,
/// "heads.NAME" one head's, "after:LAYER" the top-level children after LAYER
/// (a pipeline's last stage). Prints a line a pair, by output,
/// {"correct": n, "digest": sha256}.
constexpr const char* evaluate_py = R"(import hashlib, json, sys
import numpy as np
import torch

def parameters(model, key):
    if key == "":
        return list(model.parameters())
    if key.startswith("heads."):
        return list(getattr(model.heads, key[len("heads."):]).parameters())
    after, out, seen = key[len("after:"):], [], False
    for name, child in model.named_children():
        if seen:
            out += list(child.parameters())
        seen = seen or name == after
    return out

def correct(model, inputs, output):
    labels = torch.tensor(output["labels"])
    n = 0
    with torch.no_grad():
        for begin in range(0, inputs.shape[0], output["batch"]):
            logits = model(inputs[begin:begin + output["batch"]])
            if output["key"]:
                logits = logits[output["key"]]
            end = begin + logits.shape[0]
            n += int((logits.argmax(1) == labels[begin:end]).sum())
    return n

def evaluate(model_file, spec_file):
    spec = json.load(open(spec_file))
    x = torch.from_numpy(np.fromfile(spec["images"], dtype=np.float32).reshape(spec["shape"]))
    model = torch.jit.load(model_file)
    model.eval()
    # The same samples as the IDX file holds them (uint8): the module normalises them.
    raw = None
    if "raw" in spec:
        import gzip
        values = np.frombuffer(gzip.open(spec["raw"]["file"]).read(), dtype=np.uint8, offset=16)
        raw = torch.from_numpy(values.copy()).reshape(-1, 1, 28, 28)[:spec["raw"]["count"]]
    result = {}
    for output in spec["outputs"]:
        digest = hashlib.sha256()
        for p in parameters(model, output["digest_of"]):
            digest.update(p.detach().contiguous().numpy().tobytes())
        result[output["name"]] = {"correct": correct(model, x, output),
                                  "digest": digest.hexdigest()}
        if raw is not None:
            result[output["name"]]["raw_correct"] = correct(model, raw, output)
    return result

for model_file, spec_file in zip(sys.argv[1::2], sys.argv[2::2]):
    print(json.dumps(evaluate(model_file, spec_file)), flush=True)
)";

/// One result row of a run and how Python finds it in the module.
struct output {
  std::string row;       ///< its name in the metrics' heads (a head, a stage, "workers")
  std::string key;       ///< the forward's dict key ("" when it returns a tensor)
  std::string task;      ///< the task whose labels it predicts
  std::string digest_of; ///< see evaluate_py
  int64_t batch = 256;   ///< the evaluation batch
};

/// A job, trained, exported and evaluated in Python.
struct exported_job {
  std::string name;
  std::vector<std::string> args; ///< baton run's: the config and its --set
  std::vector<output> outputs;
};

/// Tiny workloads: 256 training samples, 200 test samples, one epoch.
std::vector<std::string> tiny(const std::string& config, std::vector<std::string> more = {}) {
  std::vector<std::string> args{"run", source_path(config), "--set", "data.train_limit=256",
                                "--set", "data.test_limit=200", "--set", "data.epochs=1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

/// The JSON of every line of `text` that starts with '{', in order.
std::vector<json> json_lines(const std::string& text) {
  std::vector<json> out;
  size_t begin = 0;
  while (begin < text.size()) {
    auto end = text.find('\n', begin);
    if (end == std::string::npos)
      end = text.size();
    if (text[begin] == '{')
      out.push_back(json::parse(text.substr(begin, end - begin), nullptr, false));
    begin = end + 1;
  }
  return out;
}

class export_python : public ::testing::Test {
protected:
  void SetUp() override {
    if (python_with_torch().empty())
      GTEST_SKIP() << no_python_torch;
  }

  /// The arguments of `baton run` without "run" as the topology loader reads them.
  static baton::actors::topology topology_of(const std::vector<std::string>& args) {
    std::vector<std::string> overrides;
    for (size_t i = 2; i + 1 < args.size(); ++i)
      if (args[i] == "--set")
        overrides.push_back(args[++i]);
    auto t = baton::actors::load_topology(args[1], overrides);
    if (!t)
      throw std::runtime_error(to_string(t.error()));
    return *t;
  }

  /// Writes the test split of `job` for Python and the evaluation spec;
  /// returns the spec's path and the split's size.
  std::pair<std::string, int64_t> write_split(const exported_job& job) {
    const auto t = topology_of(job.args);
    auto data = baton::actors::load_data(t, t.data.train_limit); // its normalisation too
    if (!data)
      throw std::runtime_error(to_string(data.error()));
    const auto& test = data->test;
    const auto images = test.images.contiguous();
    const auto file = dir_.path() + "/" + job.name + "-images.f32";
    std::ofstream(file, std::ios::binary)
      .write(static_cast<const char*>(images.data_ptr()),
             static_cast<std::streamsize>(images.nbytes()));
    json spec{{"images", file}, {"shape", images.sizes().vec()}, {"outputs", json::array()}};
    if (t.data.kind == "fashion-mnist")
      spec["raw"] = {{"file", t.data.path + "/t10k-images-idx3-ubyte.gz"},
                     {"count", test.size()}};
    for (const auto& o : job.outputs) {
      const auto* task = t.find_task(o.task);
      if (task == nullptr)
        throw std::runtime_error("no task " + o.task);
      const auto labels = baton::model::apply(*task, test.labels).contiguous();
      spec["outputs"].push_back({{"name", o.row},
                                 {"key", o.key},
                                 {"labels", std::vector<int64_t>(
                                              labels.data_ptr<int64_t>(),
                                              labels.data_ptr<int64_t>() + labels.numel())},
                                 {"digest_of", o.digest_of},
                                 {"batch", o.batch}});
    }
    const auto path = dir_.path() + "/" + job.name + "-spec.json";
    std::ofstream(path) << spec.dump();
    return {path, test.size()};
  }

  /// Trains each of `jobs` with --save-model, evaluates their files in one
  /// Python process and compares every output with its job's metrics.
  void check(const std::vector<exported_job>& jobs) {
    struct trained {
      json metrics;
      int64_t test_size = 0;
    };
    std::vector<trained> runs;
    std::vector<std::string> python_args;
    for (const auto& job : jobs) {
      SCOPED_TRACE(job.name);
      const auto model_file = dir_.path() + "/" + job.name + ".pt";
      auto args = job.args;
      args.insert(args.end(), {"--save-model", model_file});
      auto metrics = run_job(dir_, args, job.name);
      ASSERT_FALSE(metrics.is_discarded());
      const auto [spec, test_size] = write_split(job);
      ASSERT_GT(test_size, 0);
      runs.push_back({std::move(metrics), test_size});
      python_args.insert(python_args.end(), {model_file, spec});
    }
    const auto python = run_python(dir_.path(), "evaluate.py", evaluate_py, python_args);
    ASSERT_EQ(python.exit_code, 0) << python.text;
    const auto results = json_lines(python.text);
    ASSERT_EQ(results.size(), jobs.size()) << python.text;
    for (size_t j = 0; j < jobs.size(); ++j) {
      SCOPED_TRACE(jobs[j].name);
      const auto& got = results[j];
      ASSERT_FALSE(got.is_discarded()) << python.text;
      const auto& metrics = runs[j].metrics;
      const auto test_size = static_cast<double>(runs[j].test_size);
      for (const auto& o : jobs[j].outputs) {
        const json* row = nullptr;
        for (const auto& h : metrics["heads"])
          if (h["name"] == o.row)
            row = &h;
        ASSERT_NE(row, nullptr) << "no result row " << o.row << " in " << metrics.dump();
        const double accuracy = (*row)["test_accuracy"];
        EXPECT_EQ(got[o.row]["correct"].get<int64_t>(), std::llround(accuracy * test_size))
          << o.row << ": Python's predictions on the test split differ from baton's";
        EXPECT_EQ(got[o.row]["digest"], (*row)["weights_digest"])
          << o.row << ": the module's weights are not the trained ones";
        if (got[o.row].contains("raw_correct"))
          EXPECT_EQ(got[o.row]["raw_correct"].get<int64_t>(), std::llround(accuracy * test_size))
            << o.row << ": the module fed the IDX file's uint8 images differs from baton";
      }
    }
  }

  scratch_dir dir_{"export-python"};
};

/// configs/transfer.yaml's three heads on the frozen backbone (initial weights).
std::vector<output> transfer_heads() {
  std::vector<output> out;
  for (const char* head : {"all10", "footwear", "groups4"})
    out.push_back({head, head, head, std::string("heads.") + head, 32});
  return out;
}

} // namespace

TEST_F(export_python, transfer_returns_every_heads_logits) {
  const auto args = tiny("configs/transfer.yaml", {"--set", "backbone.checkpoint=none"});
  check({{"transfer", args, transfer_heads()},
         {"transfer-local", with(args, {"--mode", "local"}), transfer_heads()}});
}

TEST_F(export_python, pipeline_assembles_its_stages) {
  // The result row is the last stage: its digest covers the layers after pool2.
  const std::vector<output> last_stage{{"stage2", "", "all10", "after:pool2", 64}};
  const auto args = tiny("configs/pipeline.yaml");
  check({{"pipeline", args, last_stage},
         {"pipeline-local", with(args, {"--mode", "local"}), last_stage}});
}

TEST_F(export_python, data_parallel_saves_worker_0s_model) {
  const std::vector<output> workers{{"workers", "", "all10", "", 256}};
  const auto args = tiny("configs/data-parallel.yaml");
  check({{"ring", args, workers},
         {"ring-local", with(args, {"--mode", "local"}), workers},
         {"ps", with(args, {"--set", "data_parallel.exchange=ps"}), workers},
         {"local-sgd", with(args, {"--set", "data_parallel.sync_every=4"}), workers},
         {"freezing", tiny("configs/fine-tune.yaml", {"--set", "backbone.checkpoint=none"}),
          workers}});
}

TEST_F(export_python, ist_and_resist_save_the_assembled_network) {
  // IST's batch norms use the batch's statistics: evaluated in baton's
  // batches of ist.eval_batch (256).
  const std::vector<output> workers{{"workers", "", "all10", "", 256}};
  const auto ist = tiny("configs/ist.yaml", {"--set", "ist.hidden=[64]"});
  const auto resist = tiny("configs/resist.yaml");
  check({{"ist", ist, workers},
         {"ist-local", with(ist, {"--mode", "local"}), workers},
         {"resist", resist, workers},
         {"resist-local", with(resist, {"--mode", "local"}), workers}});
}

TEST_F(export_python, a_torchscript_backbone_is_exported_with_its_trained_layers) {
  // A user's nn.Sequential, scripted: its layers become the TorchScript
  // file's own children in the export, with the trained parameters.
  const auto made = run_python(dir_.path(), "make_backbone.py", R"(import sys
import torch
from torch import nn
torch.manual_seed(0)
backbone = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 14 * 14, 64), nn.ReLU())
torch.jit.script(backbone).save(sys.argv[1])
)",
                               {dir_.path() + "/backbone64.pt"});
  ASSERT_EQ(made.exit_code, 0) << made.text;
  const std::vector<std::string> script{"--set", "backbone.model=torchscript", "--set",
                                        "backbone.path=" + dir_.path() + "/backbone64.pt",
                                        "--set", "backbone.checkpoint=none"};
  check({{"script-transfer",
          tiny("configs/transfer.yaml", with(script, {"--set", "backbone.split=[\"2\"]"})),
          transfer_heads()},
         {"script-pipeline",
          tiny("configs/pipeline.yaml",
               with(script, {"--set", "pipeline.stages=[{last_layer: \"2\"}, {last_layer: fc2}]"})),
          {{"stage1", "", "all10", "after:2", 64}}},
         {"script-data-parallel",
          tiny("configs/data-parallel.yaml",
               with(script, {"--set", "data_parallel.model=torchscript"})),
          {{"workers", "", "all10", "", 256}}}});
}

TEST(export_flags, save_model_with_baseline_separate_is_refused) {
  const auto out = run_baton({"run", source_path("configs/transfer.yaml"), "--baseline",
                              "separate", "--save-model", "never.pt"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("--save-model saves the model of one run"), std::string::npos)
    << out.text;
}

// `--baseline separate` is the mode's own run without actors
// (mode::separate_baseline): a job without one is refused, naming those with one.
TEST(export_flags, baseline_separate_of_a_job_without_one_is_refused) {
  const auto out = run_baton({"run", source_path("configs/pipeline.yaml"), "--baseline",
                              "separate"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("--baseline separate applies to job: transfer, not job: pipeline"),
            std::string::npos)
    << out.text;
}
