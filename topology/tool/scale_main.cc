// kolo-scale: what kolo's cost model predicts for a model's gradients from a few GPUs to many:
// per job size and per all-reduce algorithm, the time of a step's all-reduces and the scaling
// efficiency (the step without communication over the step with it; bench/scale_model.h says how
// a step is modelled).
//
//   kolo-scale --xml tests/fixtures/topologies/h100-nvswitch-8gpu.xml --model resnet50
//       --compute-ms 85 [--ranks 8,16,...] [--node-gbit 400] [--json]
//
// The nodes are copies of the one in FILE (default this machine) with --ranks-per-node ranks
// (default: its GPUs, else its cores); the link and cost models are built from it exactly as
// kolo-topo builds them (KOLO_TUNING_FILE honoured), then --node-gbit, if given, replaces the
// bandwidth between nodes: the node's whole network at that raw rate, shared by its ranks.
// Exit status 2 on bad flags or an unreadable topology.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/models.h"
#include "bench/scale_model.h"
#include "collectives/select/decision_table.h"
#include "collectives/select/registry.h"
#include "collectives/select/topology_cost.h"
#include "topology/hwloc_topology.h"
#include "topology/link_model.h"

namespace kolo::scale_tool {
namespace {

struct Flags {
  std::string xml;
  std::string model = "resnet50";
  std::vector<int> ranks = {8, 16, 32, 64, 128, 256, 512, 1024};
  int ranks_per_node = 0;
  double node_gbit = 0;
  std::string memory;  // "host" or "cuda"; default cuda when the node has GPUs
  bench::StepAssumptions step;
  bool json = false;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "kolo-scale: %s\n", message.c_str());
  return 2;
}

struct Row {
  int ranks = 0;
  int nodes = 0;
  std::string algorithm;  // "auto": the selector's pick for each all-reduce
  bench::StepPrediction p;
  std::map<std::string, int> picks;  // auto only: how many all-reduces each algorithm ran
};

// Every algorithm's prediction for one step at one job size, and the selector's mix.
std::vector<Row> PredictJob(const AllreduceSelector& selector, const JobShape& shape,
                            MemoryKind memory, const bench::ModelLayout& model,
                            const bench::StepAssumptions& a) {
  // Every algorithm's time per size (negative where it is not supported), as asked.
  std::map<size_t, std::vector<std::pair<std::string, double>>> cache;
  const auto rank = [&](size_t bytes) -> const std::vector<std::pair<std::string, double>>& {
    auto it = cache.find(bytes);
    if (it == cache.end()) {
      std::vector<std::pair<std::string, double>> v;
      for (const auto& [algo, us] : selector.Rank(JobSelectionInput(bytes, shape, memory))) {
        v.emplace_back(std::string(algo->Name()), us);
      }
      it = cache.emplace(bytes, std::move(v)).first;
    }
    return it->second;
  };
  std::vector<Row> rows;
  for (const auto& [name, unused] : rank(size_t{1} << 20)) {
    bool supported = true;
    Row r{shape.ranks, shape.nodes, name, {}, {}};
    r.p = bench::PredictStep(model, a, [&](size_t bytes) {
      for (const auto& [n, us] : rank(bytes)) {
        if (n == name) {
          supported = supported && us >= 0;
          return std::max(us, 0.0);
        }
      }
      supported = false;
      return 0.0;
    });
    if (supported) rows.push_back(r);
  }
  // The selector's pick per all-reduce, as the runtime makes it.
  Row pick{shape.ranks, shape.nodes, "auto", {}, {}};
  std::vector<std::string> chosen;
  pick.p = bench::PredictStep(model, a, [&](size_t bytes) {
    auto algo = selector.Select(JobSelectionInput(bytes, shape, memory));
    chosen.push_back(algo.ok() ? std::string((*algo)->Name()) : "");
    for (const auto& [n, us] : rank(bytes)) {
      if (n == chosen.back()) return us;
    }
    return 0.0;
  });
  // The overlapped all-reduces come first (PredictStep's order), then the ones after backward.
  for (size_t k = 0; k < pick.p.allreduces.size() && k < chosen.size(); ++k) {
    ++pick.picks[chosen[k]];
  }
  rows.push_back(pick);
  return rows;
}

std::string Percent(double v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * v);
  return buf;
}

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app{
      "kolo-scale: a model's all-reduces and scaling efficiency by job size, as kolo's "
      "cost model predicts them"};
  app.add_option("--xml", f.xml, "hwloc XML export of one node (default: this machine)");
  app.add_option("--model", f.model, "gradient layout: resnet50, resnet101, bert-base");
  app.add_option("--ranks", f.ranks,
                 "job sizes in ranks, comma-separated (multiples of the "
                 "ranks per node)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--ranks-per-node", f.ranks_per_node, "default: the node's GPUs, else cores")
      ->check(CLI::Range(1, 256));
  app.add_option("--node-gbit", f.node_gbit,
                 "each node's network in Gbit/s (raw, all its "
                 "ports), shared by its ranks; default: the link model's")
      ->check(CLI::PositiveNumber);
  app.add_option("--memory", f.memory, "host or cuda (default cuda on a node with GPUs)")
      ->check(CLI::IsMember({"host", "cuda"}));
  app.add_option("--compute-ms", f.step.compute_ms,
                 "forward + backward of one step on one rank, no communication")
      ->check(CLI::PositiveNumber);
  app.add_option("--backward-share", f.step.backward_share, "the backward pass's share of it")
      ->check(CLI::Range(0.01, 1.0));
  app.add_option("--cycle-ms", f.step.cycle_ms,
                 "0 (default): the runtime wakes at each submission, as kolo does; > 0: it "
                 "looks every cycle, as Horovod (HOROVOD_CYCLE_TIME) or KOLO_WAKE_ON_SUBMIT=0")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--fusion-threshold", f.step.fusion_threshold_bytes, "KOLO_FUSION_THRESHOLD")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_flag("--json", f.json, "one JSON object per row instead of a table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  bench::ModelLayout model;
  if (!bench::ModelByName(f.model, &model) || f.model == "tiny-1000") {
    return Fail("unknown --model " + f.model + " (resnet50, resnet101, bert-base)");
  }
  auto topo = LoadTopology(f.xml);
  if (!topo.ok()) return Fail(topo.status().message());
  const int per_node = f.ranks_per_node > 0 ? f.ranks_per_node
                       : topo->gpus.empty() ? std::max(1, std::min(topo->cores, 256))
                                            : static_cast<int>(topo->gpus.size());
  const MemoryKind memory = f.memory.empty()
                                ? (topo->gpus.empty() ? MemoryKind::kHost : MemoryKind::kCuda)
                            : f.memory == "cuda" ? MemoryKind::kCuda
                                                 : MemoryKind::kHost;
  if (memory == MemoryKind::kCuda && topo->gpus.empty()) {
    return Fail("--memory cuda on a node without GPUs");
  }
  // Two copies describe the links of any number of identical nodes (as in kolo-topo).
  auto links = BuildLinkModel(JobLayout::Uniform(*topo, 2, per_node));
  if (!links.ok()) return Fail(links.status().message());
  CostModel cost = CostModelFromLinks(*links);
  if (const char* tuning = std::getenv("KOLO_TUNING_FILE")) {
    auto loaded = CostModel::Load(tuning, cost);
    if (!loaded.ok()) return Fail("KOLO_TUNING_FILE: " + loaded.status().message());
    cost = *loaded;
  }
  std::string network = "the link model's: " + links->inter_device.basis;
  if (memory == MemoryKind::kHost) network = "the link model's: " + links->inter_host.basis;
  if (f.node_gbit > 0) {
    // Raw rate, shared evenly: GB/s per rank = Gbit/s / 8 / ranks per node.
    const double per_rank_beta_us = per_node / (f.node_gbit / 8.0 * 1000.0);
    cost.inter.beta_us = cost.device_inter.beta_us = per_rank_beta_us;
    network = std::to_string(static_cast<int>(f.node_gbit)) + " Gbit/s per node, shared by " +
              std::to_string(per_node) + " ranks";
  }
  const AllreduceSelector selector("", cost);

  std::vector<Row> rows;
  for (int ranks : f.ranks) {
    if (ranks % per_node != 0) {
      return Fail("--ranks " + std::to_string(ranks) + " is not a multiple of " +
                  std::to_string(per_node) + " ranks per node");
    }
    const auto job =
        PredictJob(selector, JobShape::Uniform(ranks / per_node, per_node), memory, model, f.step);
    rows.insert(rows.end(), job.begin(), job.end());
  }
  if (f.json) {
    for (const Row& r : rows) {
      nlohmann::json j = {{"model", model.name},
                          {"ranks", r.ranks},
                          {"nodes", r.nodes},
                          {"algorithm", r.algorithm},
                          {"allreduces", r.p.allreduces.size()},
                          {"allreduce_ms", r.p.allreduce_ms},
                          {"step_ms", r.p.step_ms},
                          {"compute_ms", f.step.compute_ms},
                          {"efficiency", r.p.efficiency},
                          {"after_allreduces", r.p.after_allreduces},
                          {"after_step_ms", r.p.after_step_ms},
                          {"after_efficiency", r.p.after_efficiency}};
      if (!r.picks.empty()) j["picks"] = r.picks;
      std::printf("%s\n", j.dump().c_str());
    }
    return 0;
  }
  std::printf("# %s: %zu tensors, %.1f MiB of float32 gradients\n", model.description.c_str(),
              model.tensors.size(),
              static_cast<double>(model.NumElements()) * f.step.element_bytes / 1048576.0);
  std::printf(
      "# step %.1f ms without communication (backward %.0f%%), %s, fusion threshold "
      "%lld B; %s memory\n",
      f.step.compute_ms, 100 * f.step.backward_share,
      f.step.cycle_ms > 0 ? ("cycle " + std::to_string(f.step.cycle_ms) + " ms").c_str()
                          : "woken by each submission",
      static_cast<long long>(f.step.fusion_threshold_bytes),
      memory == MemoryKind::kCuda ? "GPU" : "host");
  std::printf("# nodes: %s, %d ranks each; between nodes %s\n", topo->source.c_str(), per_node,
              network.c_str());
  std::printf(
      "# cell: scaling efficiency overlapped (all-reduced after backward), overlapped "
      "all-reduce ms per step\n");
  std::vector<std::string> algos;  // table order, the selector's mix last
  for (const Row& r : rows) {
    if (r.algorithm != "auto" &&
        std::find(algos.begin(), algos.end(), r.algorithm) == algos.end()) {
      algos.push_back(r.algorithm);
    }
  }
  algos.push_back("auto");
  std::ostringstream out;
  out << "| ranks | nodes |";
  for (const auto& a : algos) out << " " << a << " |";
  out << "\n|---:|---:|";
  for (size_t i = 0; i < algos.size(); ++i) out << "---:|";
  out << "\n";
  for (int ranks : f.ranks) {
    out << "| " << ranks << " | " << ranks / per_node << " |";
    for (const auto& a : algos) {
      auto it = std::find_if(rows.begin(), rows.end(),
                             [&](const Row& r) { return r.ranks == ranks && r.algorithm == a; });
      if (it == rows.end()) {
        out << " - |";
        continue;
      }
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.1f", it->p.allreduce_ms);
      out << " " << Percent(it->p.efficiency) << " (" << Percent(it->p.after_efficiency) << "), "
          << ms << " |";
    }
    out << "\n";
  }
  std::fputs(out.str().c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace kolo::scale_tool

int main(int argc, char** argv) { return kolo::scale_tool::Main(argc, argv); }
