#include "bench/algorithms.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <utility>

#include "bench/check.h"
#include "bench/dtypes.h"
#include "bench/stats.h"
#include "collectives/host/handover_watch.h"
#include "collectives/mpi/mpi_node.h"
#include "collectives/node_context.h"
#include "collectives/select/registry.h"
#include "kolo/config.h"
#if KOLO_WITH_UCX
#include "collectives/ucx/ucx_communicator.h"
#include "collectives/ucx/ucx_node.h"
#endif

namespace kolo::bench {
namespace {

constexpr const char* kMpiBaseline = "MPI_Allreduce";
constexpr int kMaxWrongReports = 8;

// One column of the interleaving: MPI_Allreduce, an algorithm, or the memcpy probe.
struct Variant {
  explicit Variant(std::string n) : name(std::move(n)) {}
  std::string name;
  AllreduceAlgorithm* algorithm = nullptr;  // null: MPI_Allreduce or memcpy
  Communicator* comm = nullptr;             // what `algorithm` runs over; null: the MPI one
  bool memcpy_probe = false;
  int iters = 1;
  std::vector<double> samples_us;  // this rank's per-call mean of each timed block
  int64_t wrong = 0;
};

std::string SizeText(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) {
    std::snprintf(text, sizeof text, "%lld MiB", static_cast<long long>(bytes >> 20));
  } else if (bytes >= 1024 && bytes % 1024 == 0) {
    std::snprintf(text, sizeof text, "%lld KiB", static_cast<long long>(bytes >> 10));
  } else {
    std::snprintf(text, sizeof text, "%lld B", static_cast<long long>(bytes));
  }
  return text;
}

CostModel LoadCostModel(const World& world) {
  const char* path = std::getenv("KOLO_TUNING_FILE");
  if (path == nullptr || path[0] == '\0') return CostModel();
  StatusOr<CostModel> cost = CostModel::Load(path);
  if (!cost.ok()) Fail(world, "KOLO_TUNING_FILE: " + cost.status().ToString());
  return *cost;
}

std::string MallocSettings() {
  std::string text;
  for (const char* name : {"MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX"}) {
    const char* value = std::getenv(name);
    if (value != nullptr) text += std::string(text.empty() ? "" : " ") + name + "=" + value;
  }
  return text;
}

class Runner {
 public:
  Runner(const World& world, MpiCommunicator& comm)
      : world_(world),
        comm_(comm),
        dtype_(*ParseDtype("float")),
        op_(*ParseOp("sum")),
        pattern_(dtype_, op_, world.size) {}

  void Call(Variant& v, const Buffer& input, const Buffer& output, int64_t count) {
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    if (v.memcpy_probe) {
      std::memcpy(output.data(), input.data(), bytes);
    } else if (v.algorithm == nullptr) {
      CheckMpi(world_,
               MPI_Allreduce(input.data(), output.data(), static_cast<int>(count), MPI_FLOAT,
                             MPI_SUM, world_.comm),
               "MPI_Allreduce");
    } else {
      AllreduceArgs args;
      args.send = input.data();
      args.recv = output.data();
      args.count = static_cast<size_t>(count);
      args.dtype = DataType::kFloat32;
      args.op = ReduceOp::kSum;
      const Status s = v.algorithm->Run(v.comm != nullptr ? *v.comm : comm_, args);
      if (!s.ok()) {
        Fail(world_, "algorithm " + v.name + ", " + std::to_string(bytes) +
                         " B float32 sum: " + s.ToString());
      }
    }
  }

  void Check(Variant& v, const Buffer& output, int64_t count, const char* when) {
    std::string first_bad;
    const int64_t wrong = pattern_.CountWrong(output.data(), count, 0, &first_bad);
    v.wrong += wrong;
    if (wrong > 0 && wrong_reports_++ < kMaxWrongReports) {
      std::fprintf(stderr, "kolo-bench: rank %d: %s, %lld B (%s): %lld wrong, first: %s\n",
                   world_.rank, v.name.c_str(), static_cast<long long>(count * 4), when,
                   static_cast<long long>(wrong), first_bad.c_str());
    }
  }

  const CheckPattern& pattern() const { return pattern_; }

 private:
  const World& world_;
  MpiCommunicator& comm_;
  const DtypeInfo& dtype_;
  const OpInfo& op_;
  CheckPattern pattern_;
  int wrong_reports_ = 0;
};

void Print(const World& world, const char* format, ...) __attribute__((format(printf, 2, 3)));
void Print(const World& world, const char* format, ...) {
  if (world.rank != 0) return;
  va_list args;
  va_start(args, format);
  std::vfprintf(stdout, format, args);
  va_end(args);
  std::fflush(stdout);
}

// A --json record of one row of the table.
nlohmann::json AlgorithmJson(const AlgorithmRow& row) {
  nlohmann::json j;
  j["record"] = "row";
  j["mode"] = "algorithms";
  j["ranks"] = row.ranks;
  j["bytes"] = row.bytes;
  j["count"] = row.count;
  j["algorithm"] = row.algorithm;
  j["supported"] = row.supported;
  if (!row.supported) {
    j["reason"] = row.reason;
    return j;
  }
  j["time_us"] = row.time_us;
  j["time_min_us"] = row.min_us;
  j["time_max_us"] = row.max_us;
  j["iters"] = row.iters;
  j["algbw"] = row.algbw;
  j["busbw"] = row.busbw;
  j["vs_mpi"] = row.vs_mpi;
  j["wrong"] = row.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(row.wrong);
  j["model_us"] = row.model_us < 0 ? nlohmann::json(nullptr) : nlohmann::json(row.model_us);
  j["selected"] = row.selected;
  return j;
}

}  // namespace

std::unique_ptr<MpiCommunicator> MakeBenchCommunicator(const World& world, size_t max_call_bytes) {
  MPI_Comm dup = MPI_COMM_NULL;
  CheckMpi(world, MPI_Comm_dup(world.comm, &dup), "MPI_Comm_dup");
  CheckMpi(world, MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  auto comm = std::make_unique<MpiCommunicator>(dup, max_call_bytes);
  const char* grouping = std::getenv("KOLO_NODE_GROUPING");
  auto node = MakeMpiNodeContext(comm->comm(), grouping != nullptr ? grouping : "",
                                 max_call_bytes);
  if (!node.ok()) Fail(world, "node context: " + node.status().ToString());
  comm->set_node(*node);
  return comm;
}

std::unique_ptr<Communicator> MakeUcxBenchCommunicator(const World& world,
                                                       const MpiCommunicator& mpi) {
#if KOLO_WITH_UCX
  const MPI_Comm base = world.comm;
  UcxAllgather allgather = [base](const std::string& mine, std::vector<std::string>* all) {
    return GatherStrings(base, mine, all);
  };
  auto ucx = UcxCommunicator::Create(world.rank, world.size, std::move(allgather));
  if (!ucx.ok()) Fail(world, "--transport ucx: " + ucx.status().ToString());
  const NodeMap map = mpi.node() != nullptr ? mpi.node()->map : NodeMap::OneNode(world.size);
  auto node = MakeUcxNodeContext(**ucx, map);
  if (!node.ok()) Fail(world, "--transport ucx: node context: " + node.status().ToString());
  (*ucx)->set_node(*node);
  return std::move(*ucx);
#else
  (void)mpi;
  Fail(world, "--transport ucx: this kolo-bench was built without UCX (KOLO_WITH_UCX=OFF)");
  return nullptr;
#endif
}

std::vector<std::string> RegisteredAlgorithmNames() {
  std::vector<std::string> names;
  for (const auto& algo : MakeAllreduceAlgorithms()) names.emplace_back(algo->Name());
  return names;
}

int64_t RunAlgorithms(const World& world, const AlgorithmsOptions& options) {
  std::unique_ptr<MpiCommunicator> comm = MakeBenchCommunicator(world, options.max_call_bytes);
  const CostModel cost = LoadCostModel(world);
  const AllreduceSelector selector("", cost, "", options.shm_stores);
  // Built with the same cost model and stores as the selector, as the runtime builds its
  // table: the hierarchical all-reduce picks its cross-node algorithm by the model.
  std::vector<std::unique_ptr<AllreduceAlgorithm>> table =
      MakeAllreduceAlgorithms(std::make_shared<const CostModel>(cost),
                              NcclAllreduceAlgorithm::kEither, ShmStoresOrAuto(options.shm_stores));

  const bool all = std::find(options.names.begin(), options.names.end(), "all") !=
                   options.names.end();
  std::vector<Variant> variants;
  variants.push_back(Variant{kMpiBaseline});
  for (const auto& algo : table) {
    const std::string name(algo->Name());
    if (all || std::find(options.names.begin(), options.names.end(), name) !=
                   options.names.end()) {
      Variant v{name};
      v.algorithm = algo.get();
      variants.push_back(std::move(v));
    }
  }
  // The UCX rows: the same algorithms over a UcxCommunicator with the MPI one's nodes.
  std::unique_ptr<Communicator> ucx;
  if (options.ucx) {
    ucx = MakeUcxBenchCommunicator(world, *comm);
    const size_t own = variants.size();
    for (size_t i = 1; i < own; ++i) {
      Variant v{variants[i].name + "/ucx"};
      v.algorithm = variants[i].algorithm;
      v.comm = ucx.get();
      variants.push_back(std::move(v));
    }
  }
  Variant memcpy_probe{"memcpy"};
  memcpy_probe.memcpy_probe = true;
  variants.push_back(std::move(memcpy_probe));

  const NodeContext* node = comm->node();
  const std::string malloc_settings = MallocSettings();
  std::vector<std::string> header;
  header.push_back("algorithms on an MpiCommunicator (pieces of at most " +
                   SizeText(static_cast<int64_t>(options.max_call_bytes)) + "), float32 sum, " +
                   std::to_string(world.size) + " ranks; nodes: " +
                   (node != nullptr ? node->map.Describe() : std::string("none")) +
                   "; shared memory: " +
                   (node != nullptr && node->shm_capable ? std::string("yes")
                                                         : "no" + (node != nullptr
                                                                       ? " (" + node->shm_reason +
                                                                             ")"
                                                                       : std::string())));
  if (ucx) {
    header.push_back(
        "name/ucx: the same algorithm over a UcxCommunicator (UCP's tag API), "
        "interleaved with the rows over MPI point-to-point");
  }
  header.push_back("MPI_Allreduce as is (one call, no pieces); malloc variables: " +
                   (malloc_settings.empty()
                        ? std::string("not set (Open MPI slows from 32 MiB, docs/machine-notes.md 2)")
                        : malloc_settings));
  header.push_back("cost model: " + cost.source);
  header.push_back("time: per-call mean of a block of up to -n " + std::to_string(options.iters) +
                   " calls (fewer where a block would pass " +
                   std::to_string(static_cast<int>(options.block_target_us / 1000)) +
                   " ms), median of -R " + std::to_string(options.repeats) +
                   " blocks, max over ranks; variants interleaved");
  header.push_back("vs MPI = MPI_Allreduce's time / this time (= busbw ratio); * = selector's "
                   "pick");
  header.push_back("shm: 3S bound = 3 x memcpy time / shm time (a single-copy all-reduce moves "
                   "~3S bytes per rank; over 100%: its pieces stay in cache, so less reaches "
                   "memory); x memcpy = shm time / memcpy time (1 = the floor of any out-of-place "
                   "all-reduce: read S, write S)");
  for (const std::string& line : header) Print(world, "# %s\n", line.c_str());
  Print(world, "#%11s %-16s %10s %7s %7s %7s %6s %7s %10s %s\n", "size", "algorithm", "time",
        "iters", "algbw", "busbw", "vs MPI", "#wrong", "model", "note");
  Print(world, "#%11s %-16s %10s %7s %7s %7s %6s %7s %10s\n", "(B)", "", "(us)", "", "(GB/s)",
        "(GB/s)", "", "", "(us)");

  const int64_t max_bytes = options.sizes.empty()
                                ? 0
                                : *std::max_element(options.sizes.begin(), options.sizes.end());
  const Buffer input(world, static_cast<size_t>(std::max<int64_t>(max_bytes, 4)), "the input");
  const Buffer output(world, static_cast<size_t>(std::max<int64_t>(max_bytes, 4)), "the output");
  Runner runner(world, *comm);
  runner.pattern().Fill(input.data(), max_bytes / 4, world.rank, 0);

  std::vector<AlgorithmRow> rows;
  std::map<std::string, std::string> last_reason;  // algorithm -> the reason printed last
  int64_t total_wrong = 0;
  for (const int64_t size : options.sizes) {
    const int64_t count = size / 4;
    if (count == 0) continue;
    const int64_t bytes = count * 4;
    // What the selector knows of a communicator for this size: each variant is asked about
    // the communicator it runs on (MPI's, or UCX's, which has no native all-reduce).
    const auto describe = [&](const Communicator& on) {
      SelectionInput in = DescribeCommunicator(on);
      in.bytes = static_cast<size_t>(bytes);
      in.count = static_cast<size_t>(count);
      in.dtype = DataType::kFloat32;
      in.op = ReduceOp::kSum;
      in.cost = &cost;
      return in;
    };
    const SelectionInput in = describe(*comm);

    std::vector<Variant*> active;
    std::vector<AlgorithmRow> unsupported;
    for (Variant& v : variants) {
      v.samples_us.clear();
      v.wrong = 0;
      if (v.algorithm != nullptr) {
        const Status s = v.algorithm->Supports(v.comm != nullptr ? describe(*v.comm) : in);
        if (!s.ok()) {
          AlgorithmRow row;
          row.ranks = world.size;
          row.bytes = bytes;
          row.count = count;
          row.algorithm = v.name;
          row.supported = false;
          row.reason = s.message();
          unsupported.push_back(row);
          continue;
        }
      }
      active.push_back(&v);
    }

    // Checked first call, then the warmup calls, whose time sizes the blocks.
    std::vector<double> warm_us;
    for (Variant* v : active) {
      if (options.check && !v->memcpy_probe) {
        Poison(output.data(), static_cast<size_t>(bytes));
        runner.Call(*v, input, output, count);
        runner.Check(*v, output, count, "first call");
      } else {
        runner.Call(*v, input, output, count);
      }
      const int more = std::max(1, options.warmup - 1);
      Barrier(world);
      const double start = NowSeconds();
      for (int w = 0; w < more; ++w) runner.Call(*v, input, output, count);
      warm_us.push_back((NowSeconds() - start) * 1e6 / more);
    }
    warm_us = MaxOverRanks(world, warm_us);
    for (size_t k = 0; k < active.size(); ++k) {
      active[k]->iters = BlockIters(warm_us[k], options.block_target_us, options.iters);
    }

    const size_t n = active.size();
    for (int r = 0; r < options.repeats; ++r) {
      const bool last = r == options.repeats - 1;
      for (size_t k = 0; k < n; ++k) {
        Variant& v = *active[(r + k) % n];
        const bool check = options.check && last && !v.memcpy_probe;
        if (check) Poison(output.data(), static_cast<size_t>(bytes));
        Barrier(world);
        const double start = NowSeconds();
        for (int i = 0; i < v.iters; ++i) runner.Call(v, input, output, count);
        v.samples_us.push_back((NowSeconds() - start) * 1e6 / v.iters);
        if (check) runner.Check(v, output, count, "last timed block");
      }
    }

    std::vector<double> samples;
    for (Variant* v : active) samples.insert(samples.end(), v->samples_us.begin(), v->samples_us.end());
    samples = CombineOverRanks(world, samples, options.average);
    std::vector<AlgorithmRow> measured;
    double mpi_us = 0, memcpy_us = 0;
    for (size_t k = 0; k < n; ++k) {
      const Variant& v = *active[k];
      const std::vector<double> mine(samples.begin() + k * options.repeats,
                                     samples.begin() + (k + 1) * options.repeats);
      AlgorithmRow row;
      row.ranks = world.size;
      row.bytes = bytes;
      row.count = count;
      row.algorithm = v.name;
      row.time_us = Median(mine);
      row.min_us = *std::min_element(mine.begin(), mine.end());
      row.max_us = *std::max_element(mine.begin(), mine.end());
      row.iters = v.iters;
      row.algbw = AlgBwGBs(bytes, row.time_us);
      row.busbw = AllreduceBusBwGBs(row.algbw, world.size);
      row.wrong = options.check && !v.memcpy_probe ? SumOverRanks(world, v.wrong) : -1;
      if (row.wrong > 0) total_wrong += row.wrong;
      if (v.algorithm != nullptr) row.model_us = v.algorithm->EstimateMicros(in);
      if (v.name == kMpiBaseline) mpi_us = row.time_us;
      if (v.memcpy_probe) memcpy_us = row.time_us;
      measured.push_back(row);
    }

    // The selector's pick, and how it fares against the best measured algorithm.
    StatusOr<AllreduceAlgorithm*> pick = selector.Select(in);
    const std::string pick_name = pick.ok() ? std::string((*pick)->Name()) : "";
    const AlgorithmRow* best = nullptr;
    const AlgorithmRow* picked = nullptr;
    for (AlgorithmRow& row : measured) {
      if (row.algorithm == kMpiBaseline || row.algorithm == "memcpy") continue;
      if (best == nullptr || row.time_us < best->time_us) best = &row;
      if (row.algorithm == pick_name) {
        row.selected = true;
        picked = &row;
      }
      if (row.algorithm == "shm" && row.time_us > 0) {
        row.bound_fraction = 3.0 * memcpy_us / row.time_us;
      }
    }
    for (AlgorithmRow& row : measured) {
      if (!row.algorithm.empty() && row.algorithm != "memcpy" && row.time_us > 0 && mpi_us > 0) {
        row.vs_mpi = mpi_us / row.time_us;
      }
      if (row.algorithm == "memcpy") continue;  // reported in the summary line
      std::string note;
      if (row.bound_fraction >= 0) {
        char text[64];
        std::snprintf(text, sizeof text, "3S bound %.0f%%, %.2fx memcpy",
                      100 * row.bound_fraction, 3.0 / row.bound_fraction);
        note = text;
      }
      char model[32] = "";
      if (row.model_us >= 0) std::snprintf(model, sizeof model, "%.2f", row.model_us);
      Print(world, " %11lld %-16s %10.2f %7d %7.2f %7.2f %6.2f %7s %10s %s\n",
            static_cast<long long>(bytes), (row.algorithm + (row.selected ? " *" : "")).c_str(),
            row.time_us, row.iters, row.algbw, row.busbw, row.vs_mpi,
            row.wrong < 0 ? "N/A" : std::to_string(row.wrong).c_str(),
            model, note.c_str());
    }
    for (const AlgorithmRow& row : unsupported) {  // once, until the reason changes
      std::string& last = last_reason[row.algorithm];
      if (last == row.reason) continue;
      last = row.reason;
      Print(world, " %11lld %-16s %s\n", static_cast<long long>(bytes), row.algorithm.c_str(),
            ("not supported: " + row.reason + " (from this size on)").c_str());
    }
    char copy[96];
    std::snprintf(copy, sizeof copy, ": memcpy %.2f GB/s per rank (all ranks at once); selector: ",
                  AlgBwGBs(bytes, memcpy_us));
    std::string summary = "  " + SizeText(bytes) + copy;
    if (!pick.ok()) {
      summary += "none (" + pick.status().message() + ")";
    } else if (picked == nullptr) {
      summary += pick_name + " (not measured in this run)";
    } else if (best != nullptr && best->time_us > 0) {
      char text[160];
      std::snprintf(text, sizeof text, "%s, %.2fx the best measured (%s, %.2f us)",
                    pick_name.c_str(), picked->time_us / best->time_us, best->algorithm.c_str(),
                    best->time_us);
      summary += text;
    }
    Print(world, "#%s\n", summary.c_str());
    if (options.json != nullptr) {
      for (const std::vector<AlgorithmRow>* part : {&measured, &unsupported}) {
        for (const AlgorithmRow& row : *part) options.json->Write(AlgorithmJson(row));
      }
    }
    rows.insert(rows.end(), measured.begin(), measured.end());
    rows.insert(rows.end(), unsupported.begin(), unsupported.end());
  }
  Print(world, "#\n# Out of bounds values : %lld %s\n#\n", static_cast<long long>(total_wrong),
        !options.check ? "(not checked)" : total_wrong == 0 ? "OK" : "FAILED");

  if (!options.output.empty() && world.rank == 0) {
    std::ofstream file(options.output);
    WriteAlgorithmsCsv(file, header, rows);
    if (!file.good()) Fail(world, "--output: cannot write '" + options.output + "'");
    Print(world, "# rows written to %s\n", options.output.c_str());
  }
  Barrier(world);
  return total_wrong;
}

}  // namespace kolo::bench
