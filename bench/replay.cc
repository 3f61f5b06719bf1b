#include "bench/replay.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "bench/check.h"

namespace kolo::bench {
namespace {

constexpr int64_t kAlignBytes = 256;
constexpr int kMaxWrongReports = 8;

struct Slot {
  const TensorSpec* spec;
  int64_t count;         // elements
  int64_t arena_offset;  // bytes, in the input and output arenas
  int64_t packed_index;  // elements before it in registration order: its check-pattern index
};

class Replayer {
 public:
  Replayer(const World& world, const MpiAllreducer& mpi, const ModelLayout& model,
           const ReplayOptions& options)
      : world_(world),
        mpi_(mpi),
        options_(options),
        dtype_(*options.dtype),
        op_(*options.op),
        pattern_(dtype_, op_, world.size) {
    const auto elem = static_cast<int64_t>(dtype_.size);
    int64_t offset = 0;
    int64_t packed = 0;
    for (const TensorSpec& t : model.tensors) {
      slots_.push_back(Slot{&t, t.NumElements(), offset, packed});
      offset += (t.NumElements() * elem + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
      packed += t.NumElements();
    }
    arena_bytes_ = offset;
    total_count_ = packed;
    order_ = BackwardOrder(model);
    handles_.resize(slots_.size());
  }

  int64_t total_count() const { return total_count_; }
  bool exact() const { return pattern_.exact(); }

  // Allocates (and first-touches) what the chosen paths need; fills the input.
  void Allocate() {
    auto wants = [&](const char* p) {
      return std::find(options_.paths.begin(), options_.paths.end(), p) != options_.paths.end();
    };
    input_ = Buffer(world_, arena_bytes_, "the model's input gradients");
    if (wants("kolo")) kolo_out_ = Buffer(world_, arena_bytes_, "kolo's outputs");
    if (wants("mpi-per-tensor") || wants("mpi-fused")) {
      mpi_out_ = Buffer(world_, arena_bytes_, "MPI's outputs");
    }
    if (wants("mpi-fused")) {
      fused_ = Buffer(world_, total_count_ * dtype_.size, "the fusion buffer");
    }
    if (wants("memcpy")) copy_out_ = Buffer(world_, arena_bytes_, "the copies' outputs");
    for (const Slot& s : slots_) {
      pattern_.Fill(At(input_, s), s.count, world_.rank, s.packed_index);
    }
  }

  const Buffer& Output(const std::string& path) const {
    return path == "kolo" ? kolo_out_ : path == "memcpy" ? copy_out_ : mpi_out_;
  }

  void Step(const std::string& path) {
    if (path == "kolo") {
      for (int t : order_) {
        const Slot& s = slots_[t];
        handles_[t] =
            KoloSubmit(world_, s.spec->name.c_str(), At(input_, s), At(kolo_out_, s), dtype_.kolo,
                       static_cast<int>(s.spec->shape.size()), s.spec->shape.data(), op_.kolo);
      }
      for (int t : order_) KoloFinish(world_, handles_[t], slots_[t].spec->name.c_str());
    } else if (path == "mpi-per-tensor") {
      for (int t : order_) {
        const Slot& s = slots_[t];
        mpi_.Run(At(input_, s), At(mpi_out_, s), s.count, dtype_, op_);
      }
    } else if (path == "memcpy") {
      for (int t : order_) {
        const Slot& s = slots_[t];
        std::memcpy(At(copy_out_, s), At(input_, s), static_cast<size_t>(s.count) * dtype_.size);
      }
    } else {  // mpi-fused
      auto* fused = static_cast<char*>(fused_.data());
      size_t pos = 0;
      for (int t : order_) {
        const Slot& s = slots_[t];
        const size_t n = static_cast<size_t>(s.count) * dtype_.size;
        std::memcpy(fused + pos, At(input_, s), n);
        pos += n;
      }
      mpi_.Run(fused, fused, total_count_, dtype_, op_);
      pos = 0;
      for (int t : order_) {
        const Slot& s = slots_[t];
        const size_t n = static_cast<size_t>(s.count) * dtype_.size;
        std::memcpy(At(mpi_out_, s), fused + pos, n);
        pos += n;
      }
    }
  }

  // Wrong elements of `path`'s outputs on this rank; describes the first in *first_bad.
  int64_t CountWrong(const std::string& path, std::string* first_bad) const {
    const Buffer& out = Output(path);
    int64_t wrong = 0;
    for (const Slot& s : slots_) {
      std::string bad;
      const int64_t w = pattern_.CountWrong(At(out, s), s.count, s.packed_index, &bad);
      if (w > 0 && wrong == 0) *first_bad = "tensor '" + s.spec->name + "' " + bad;
      wrong += w;
    }
    return wrong;
  }

 private:
  static char* At(const Buffer& b, const Slot& s) {
    return static_cast<char*>(b.data()) + s.arena_offset;
  }

  const World& world_;
  const MpiAllreducer& mpi_;
  const ReplayOptions& options_;
  const DtypeInfo& dtype_;
  const OpInfo& op_;
  const CheckPattern pattern_;
  std::vector<Slot> slots_;
  std::vector<int> order_;
  std::vector<kolo_handle_t> handles_;
  int64_t arena_bytes_ = 0;
  int64_t total_count_ = 0;
  Buffer input_, kolo_out_, mpi_out_, fused_, copy_out_;
};

}  // namespace

void RunReplay(const World& world, const MpiAllreducer& mpi, const ModelLayout& model,
               const ReplayOptions& options, Report* report) {
  Replayer replayer(world, mpi, model, options);
  replayer.Allocate();
  if (options.check && !replayer.exact()) {
    report->Note(
        "no input pattern reduces exactly for this dtype/op/ranks; #wrong may count "
        "rounding");
  }
  const int npaths = static_cast<int>(options.paths.size());
  const int total = options.warmup + options.steps;
  std::vector<std::vector<double>> samples(npaths);
  std::vector<int64_t> wrong(npaths, 0);
  int wrong_reports = 0;
  for (int s = 0; s < total; ++s) {
    for (int k = 0; k < npaths; ++k) {
      const int p = (s + k) % npaths;
      const std::string& path = options.paths[p];
      // The copies reduce nothing; there is nothing to check.
      const bool check_step = options.check && (s == 0 || s == total - 1) && path != "memcpy";
      if (check_step) {
        const Buffer& out = replayer.Output(path);
        Poison(out.data(), out.bytes());
      }
      Barrier(world);
      const double start = NowSeconds();
      replayer.Step(path);
      const double elapsed_us = (NowSeconds() - start) * 1e6;
      if (s >= options.warmup) samples[p].push_back(elapsed_us);
      if (check_step) {
        std::string first_bad;
        const int64_t w = replayer.CountWrong(path, &first_bad);
        wrong[p] += w;
        if (w > 0 && wrong_reports++ < kMaxWrongReports) {
          std::fprintf(stderr,
                       "kolo-bench: rank %d: model %s, path %s, step %d: %lld wrong, "
                       "first: %s\n",
                       world.rank, model.name.c_str(), path.c_str(), s, static_cast<long long>(w),
                       first_bad.c_str());
        }
      }
    }
  }

  report->Model(SummarizeReplay(world, model, options, model.description,
                                replayer.total_count(), samples, wrong));
}

ModelResult SummarizeReplay(const World& world, const ModelLayout& model,
                            const ReplayOptions& options, const std::string& description,
                            int64_t total_count, const std::vector<std::vector<double>>& samples,
                            const std::vector<int64_t>& wrong) {
  std::vector<double> flat;
  for (const auto& v : samples) flat.insert(flat.end(), v.begin(), v.end());
  flat = MaxOverRanks(world, flat);
  ModelResult result;
  result.model = model.name;
  result.description = description;
  result.tensors = static_cast<int>(model.tensors.size());
  result.count = total_count;
  result.bytes = result.count * static_cast<int64_t>(options.dtype->size);
  result.dtype = std::string(options.dtype->name);
  result.op = std::string(options.op->name);
  result.steps = options.steps;
  result.warmup = options.warmup;
  for (size_t p = 0; p < samples.size(); ++p) {
    const auto first = flat.begin() + static_cast<ptrdiff_t>(p) * options.steps;
    const std::vector<double> mine(first, first + options.steps);
    PathResult r;
    r.path = options.paths[p];
    r.time_us = Median(mine);
    r.min_us = mine.empty() ? 0 : *std::min_element(mine.begin(), mine.end());
    r.max_us = mine.empty() ? 0 : *std::max_element(mine.begin(), mine.end());
    r.wrong = options.check && r.path != "memcpy" ? SumOverRanks(world, wrong[p]) : -1;
    result.paths.push_back(r);
  }
  return result;
}

}  // namespace kolo::bench
