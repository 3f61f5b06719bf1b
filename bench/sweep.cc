#include "bench/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "bench/collective.h"

namespace kolo::bench {
namespace {

// Stop printing first-wrong-element lines after this many per run; the counts still add up.
constexpr int kMaxWrongReports = 8;

// One path in one form (out of place or in place) of the sweep.
struct Slot {
  std::string path;
  bool in_place;
  Buffer output;                   // the output; in place, also the input
  std::vector<double> samples_us;  // this rank's per-call mean of each timed block
  int64_t wrong = 0;               // this rank's wrong elements
  bool failed = false;             // any wrong element at this size (nccl-tests' error count)
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
    if (next <= s) break;  // -b 0 with -f: refused by flags.cc (nccl-tests would loop at 0)
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
  const size_t buffer_bytes = static_cast<size_t>(std::max<int64_t>(max_bytes, 1));
  const Buffer input(world, buffer_bytes, "the input");
  const Buffer pristine(world, buffer_bytes, "the in-place input");
  std::vector<Slot> slots;
  for (const std::string& name : options.paths) {
    for (const bool in_place : {false, true}) {
      slots.push_back(Slot{name, in_place, Buffer(world, buffer_bytes, "an output"), {}, 0, false});
    }
  }
  const int nslots = static_cast<int>(slots.size());
  report->SweepColumns(options.collective, options.paths);
  int wrong_reports = 0;
  const int total = static_cast<int>(sizes.size() * options.dtypes.size() * options.ops.size());
  int done = 0;
  Progress progress(options.progress && world.rank == 0, total);

  for (const DtypeInfo* dtype : options.dtypes) {
    for (const OpInfo* op : options.ops) {
      const CollectiveRunner runner(world, mpi, options.collective, *dtype, *op, options.root);
      if (options.check && !runner.exact()) {
        progress.Clear();
        report->Note(std::string(dtype->name) + " " + std::string(op->name) + " over " +
                     std::to_string(world.size) +
                     " ranks: no input pattern reduces exactly; #wrong may count rounding");
      }
      for (const int64_t size : sizes) {
        progress.Done(done++);
        const CollectiveLayout layout =
            LayoutFor(options.collective, size, static_cast<int64_t>(dtype->size), world.size);
        const size_t in_place_bytes = static_cast<size_t>(runner.InPlaceBytes(layout));
        runner.FillInput(input.data(), layout);
        runner.FillInPlace(pristine.data(), layout);
        const std::string stem = "kolo-bench/" + std::string(CollectiveName(options.collective)) +
                                 "/" + std::string(dtype->name) + "/" + std::string(op->name) +
                                 "/" + std::to_string(layout.bytes);
        const std::string names[2] = {stem, stem + "/in-place"};
        auto send_of = [&](Slot& slot) -> const void* {
          return slot.in_place ? slot.output.data() : input.data();
        };
        auto reset = [&](Slot& slot) {
          if (slot.in_place) {
            std::memcpy(slot.output.data(), pristine.data(), in_place_bytes);
          } else {
            Poison(slot.output.data(), static_cast<size_t>(layout.recv) * dtype->size);
          }
        };
        auto checked_call = [&](Slot& slot, const char* when) {
          reset(slot);
          runner.Call(slot.path, send_of(slot), slot.output.data(), layout,
                      names[slot.in_place ? 1 : 0], /*capture=*/true);
          std::string first_bad;
          const int64_t wrong =
              runner.CountWrong(slot.path, slot.output.data(), layout, slot.in_place, &first_bad);
          slot.wrong += wrong;
          slot.failed = slot.failed || wrong > 0;
          if (wrong > 0 && wrong_reports++ < kMaxWrongReports) {
            progress.Clear();
            std::fprintf(stderr,
                         "kolo-bench: rank %d: %s, path %s%s, %s %s, %lld B (%s): %lld wrong, "
                         "first: %s\n",
                         world.rank, CollectiveName(options.collective), slot.path.c_str(),
                         slot.in_place ? " in place" : "", std::string(dtype->name).c_str(),
                         runner.OpColumn().c_str(), static_cast<long long>(layout.bytes), when,
                         static_cast<long long>(wrong), first_bad.c_str());
          }
        };
        auto call = [&](Slot& slot) {
          runner.Call(slot.path, send_of(slot), slot.output.data(), layout,
                      names[slot.in_place ? 1 : 0], /*capture=*/false);
        };

        for (Slot& slot : slots) {
          slot.samples_us.clear();
          slot.wrong = 0;
          slot.failed = false;
          if (options.check) {
            checked_call(slot, "first call");
          } else {
            reset(slot);
          }
        }
        const int more_warmup = options.check ? options.warmup - 1 : options.warmup;
        for (int w = 0; w < more_warmup; ++w) {
          for (Slot& slot : slots) call(slot);
        }
        for (int r = 0; r < options.repeats; ++r) {
          for (int k = 0; k < nslots; ++k) {
            Slot& slot = slots[(r + k) % nslots];
            if (slot.in_place) reset(slot);
            Barrier(world);
            const double start = NowSeconds();
            for (int i = 0; i < options.iters; ++i) {
              call(slot);
              if (options.blocking) Barrier(world);
            }
            slot.samples_us.push_back((NowSeconds() - start) * 1e6 / options.iters);
          }
        }

        std::vector<double> samples;
        for (Slot& slot : slots) {
          if (options.check) checked_call(slot, "after the timed calls");
          samples.insert(samples.end(), slot.samples_us.begin(), slot.samples_us.end());
        }
        samples = CombineOverRanks(world, samples, options.average);
        std::vector<PathResult> results;
        for (int s = 0; s < nslots; ++s) {
          const auto first = samples.begin() + s * options.repeats;
          const std::vector<double> mine(first, first + options.repeats);
          const double median = Median(mine);
          const double lo = *std::min_element(mine.begin(), mine.end());
          const double hi = *std::max_element(mine.begin(), mine.end());
          const int64_t wrong = options.check ? SumOverRanks(world, slots[s].wrong) : -1;
          const int64_t failed = options.check ? SumOverRanks(world, slots[s].failed ? 1 : 0) : 0;
          if (!slots[s].in_place) {
            PathResult result;
            result.path = slots[s].path;
            result.time_us = median;
            result.min_us = lo;
            result.max_us = hi;
            result.wrong = wrong;
            result.failed = failed;
            results.push_back(result);
          } else {
            InPlaceResult& ip = results.back().in_place;  // the out-of-place slot comes first
            ip.measured = true;
            ip.time_us = median;
            ip.min_us = lo;
            ip.max_us = hi;
            ip.wrong = wrong;
            ip.failed = failed;
          }
        }
        progress.Clear();
        report->SweepRow(SweepKey{layout.bytes, layout.count, std::string(dtype->name),
                                  runner.OpColumn(), runner.RootColumn()},
                         results);
      }
    }
  }
}

}  // namespace kolo::bench
