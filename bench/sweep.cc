#include "bench/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/check.h"

namespace kolo::bench {
namespace {

// Stop printing first-wrong-element lines after this many per run; the counts still add up.
constexpr int kMaxWrongReports = 8;

struct SweepPath {
  std::string name;
  Buffer output;
  std::vector<double> samples_us;  // this rank's per-call mean of each timed block
  int64_t wrong = 0;               // this rank's wrong elements
};

class SizeRunner {
 public:
  SizeRunner(const World& world, const MpiAllreducer& mpi, const Buffer& input,
             const DtypeInfo& dtype, const OpInfo& op)
      : world_(world), mpi_(mpi), input_(input), dtype_(dtype), op_(op) {}

  void Call(const SweepPath& path, int64_t count, const char* name) const {
    if (path.name == "mpi") {
      mpi_.Run(input_.data(), path.output.data(), count, dtype_, op_);
    } else {
      const int64_t shape[1] = {count};
      KoloFinish(world_,
                 KoloSubmit(world_, name, input_.data(), path.output.data(), dtype_.kolo, 1, shape,
                            op_.kolo),
                 name);
    }
  }

 private:
  const World& world_;
  const MpiAllreducer& mpi_;
  const Buffer& input_;
  const DtypeInfo& dtype_;
  const OpInfo& op_;
};

}  // namespace

std::vector<int64_t> SweepSizes(int64_t min_bytes, int64_t max_bytes, double step_factor,
                                int64_t step_bytes) {
  std::vector<int64_t> sizes;
  if (min_bytes < 0 || (step_bytes <= 0 && step_factor <= 1.0)) {
    if (min_bytes >= 0 && min_bytes <= max_bytes) sizes.push_back(min_bytes);
    return sizes;
  }
  for (int64_t s = min_bytes; s <= max_bytes;) {
    sizes.push_back(s);
    const int64_t next =
        step_bytes > 0 ? s + step_bytes : static_cast<int64_t>(std::floor(s * step_factor));
    if (next <= s) break;  // min 0 with a factor: nccl-tests stops too
    s = next;
  }
  return sizes;
}

void RunSweep(const World& world, const MpiAllreducer& mpi, const SweepOptions& options,
              Report* report) {
  const std::vector<int64_t> sizes =
      SweepSizes(options.min_bytes, options.max_bytes, options.step_factor, options.step_bytes);
  if (sizes.empty()) {
    report->Note("no sizes between -b and -e");
    return;
  }
  const int64_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  const Buffer input(world, static_cast<size_t>(max_bytes), "the input");
  std::vector<SweepPath> paths;
  for (const std::string& name : options.paths) {
    paths.push_back(
        SweepPath{name, Buffer(world, static_cast<size_t>(max_bytes), "an output"), {}, 0});
  }
  const int npaths = static_cast<int>(paths.size());
  report->SweepColumns(options.paths);
  int wrong_reports = 0;

  for (const DtypeInfo* dtype : options.dtypes) {
    for (const OpInfo* op : options.ops) {
      const CheckPattern pattern(*dtype, *op, world.size);
      pattern.Fill(input.data(), max_bytes / static_cast<int64_t>(dtype->size), world.rank, 0);
      if (options.check && !pattern.exact()) {
        report->Note(std::string(dtype->name) + " " + std::string(op->name) + " over " +
                     std::to_string(world.size) +
                     " ranks: no input pattern reduces exactly; #wrong may count rounding");
      }
      const SizeRunner runner(world, mpi, input, *dtype, *op);

      for (const int64_t size : sizes) {
        const int64_t count = size / static_cast<int64_t>(dtype->size);
        if (count == 0) continue;
        const int64_t bytes = count * static_cast<int64_t>(dtype->size);
        const std::string name = "kolo-bench/" + std::string(dtype->name) + "/" +
                                 std::string(op->name) + "/" + std::to_string(bytes);
        auto check = [&](SweepPath& path, const char* when) {
          std::string first_bad;
          const int64_t wrong = pattern.CountWrong(path.output.data(), count, 0, &first_bad);
          path.wrong += wrong;
          if (wrong > 0 && wrong_reports++ < kMaxWrongReports) {
            std::fprintf(stderr,
                         "kolo-bench: rank %d: path %s, %s %s, %lld B (%s): %lld wrong, first: "
                         "%s\n",
                         world.rank, path.name.c_str(), std::string(dtype->name).c_str(),
                         std::string(op->name).c_str(), static_cast<long long>(bytes), when,
                         static_cast<long long>(wrong), first_bad.c_str());
          }
        };

        for (SweepPath& path : paths) {
          path.samples_us.clear();
          path.wrong = 0;
          if (options.check) {
            Poison(path.output.data(), static_cast<size_t>(bytes));
            runner.Call(path, count, name.c_str());
            check(path, "first call");
          }
        }
        const int more_warmup = options.check ? options.warmup - 1 : options.warmup;
        for (int w = 0; w < more_warmup; ++w) {
          for (const SweepPath& path : paths) runner.Call(path, count, name.c_str());
        }
        for (int r = 0; r < options.repeats; ++r) {
          const bool last = r == options.repeats - 1;
          for (int k = 0; k < npaths; ++k) {
            SweepPath& path = paths[(r + k) % npaths];
            if (options.check && last) Poison(path.output.data(), static_cast<size_t>(bytes));
            Barrier(world);
            const double start = NowSeconds();
            for (int i = 0; i < options.iters; ++i) runner.Call(path, count, name.c_str());
            path.samples_us.push_back((NowSeconds() - start) * 1e6 / options.iters);
          }
        }

        std::vector<double> samples;
        for (SweepPath& path : paths) {
          if (options.check) check(path, "last timed call");
          samples.insert(samples.end(), path.samples_us.begin(), path.samples_us.end());
        }
        samples = MaxOverRanks(world, samples);
        std::vector<PathResult> results;
        for (int p = 0; p < npaths; ++p) {
          const auto first = samples.begin() + p * options.repeats;
          const std::vector<double> mine(first, first + options.repeats);
          PathResult result;
          result.path = paths[p].name;
          result.time_us = Median(mine);
          result.min_us = *std::min_element(mine.begin(), mine.end());
          result.max_us = *std::max_element(mine.begin(), mine.end());
          result.wrong = options.check ? SumOverRanks(world, paths[p].wrong) : -1;
          results.push_back(result);
        }
        report->SweepRow(bytes, count, std::string(dtype->name), std::string(op->name), results);
      }
    }
  }
}

}  // namespace kolo::bench
