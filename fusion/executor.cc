#include "fusion/executor.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "collectives/reduce.h"

namespace kolo {
namespace {

ReduceOp WireOp(ReduceOp op) { return LowerReduce(op, 1.0, 1).wire_op; }

DataType WireType(DataType dtype) { return IsHalf(dtype) ? DataType::kFloat32 : dtype; }

// Tells the observer (if any) that a stage started, and that it finished when the scope ends,
// early error returns included.
class StageScope {
 public:
  StageScope(ExecutorObserver* observer, ExecutorObserver::Stage stage, size_t first, size_t last)
      : observer_(observer), stage_(stage), first_(first), last_(last) {
    if (observer_) observer_->StageStarted(stage_, first_, last_);
  }
  ~StageScope() {
    if (observer_) observer_->StageFinished(stage_, first_, last_);
  }
  StageScope(const StageScope&) = delete;
  StageScope& operator=(const StageScope&) = delete;

 private:
  ExecutorObserver* observer_;
  ExecutorObserver::Stage stage_;
  size_t first_, last_;
};

// The last tensor with data in the piece of `n` > 0 elements that starts at element `toff` of
// tensor `ti`.
size_t LastTensor(const std::vector<FusedTensor>& tensors, size_t ti, size_t toff, size_t n) {
  for (size_t left = n;; ++ti, toff = 0) {
    const size_t here = tensors[ti].count - toff;
    if (here >= left) return ti;
    left -= here;
  }
}

}  // namespace

// A floating result has one scale left (Average's 1/size, the postscale): an algorithm that can
// apply it in its own last pass over the result (CanRunScaled) saves Finish's pass over it.
// That scale, or 1 where the algorithm leaves it to Finish.
double FusionExecutor::FoldedScale(Communicator& comm, const AllreduceAlgorithm& algorithm,
                                   const AllreduceJob& job) {
  if (!IsFloatingPoint(job.dtype) || IsHalf(job.dtype) || !algorithm.CanRunScaled(job.dtype)) {
    return 1.0;
  }
  return LowerReduce(job.op, job.postscale, comm.Size()).float_postscale;
}

Status FusionExecutor::Finish(void* dst, const void* src, size_t count, const AllreduceJob& job,
                              int size) {
  const LoweredReduce lowered = LowerReduce(job.op, job.postscale, size);
  if (IsHalf(job.dtype)) {
    NarrowFromFloat32(dst, static_cast<const float*>(src), count, job.dtype,
                      static_cast<float>(lowered.float_postscale));
    return Status::OK();
  }
  if (IsFloatingPoint(job.dtype)) {
    return ScaleCopy(dst, src, count, job.dtype, lowered.float_postscale);
  }
  if (lowered.integer_divisor != 1) {
    KOLO_RETURN_IF_ERROR(DivideCopy(dst, src, count, job.dtype, lowered.integer_divisor));
    return ScaleCopy(dst, dst, count, job.dtype, lowered.integer_postscale);
  }
  return ScaleCopy(dst, src, count, job.dtype, lowered.integer_postscale);
}

Status FusionExecutor::Run(Communicator& comm, AllreduceAlgorithm& algorithm,
                           const AllreduceJob& job, ExecutorObserver* observer) {
  const size_t n = job.tensors.size();
  if (n == 0) return Status::OK();  // the same on every rank: nothing to exchange
  if (IsHalf(job.dtype)) return RunPieces(comm, algorithm, job, 0, n, observer);
  if (n == 1) return RunDirect(comm, algorithm, job, 0, observer);
  if (algorithm.RunsLists(job.dtype)) return RunList(comm, algorithm, job, observer);
  // A fused response can hold tensors of direct_bytes or more (the planner fuses them where
  // the algorithm for the node takes lists); with one that does not, they go alone, in their own
  // buffers, and the runs of smaller tensors between them through the fusion buffer. The same
  // counts on every rank, so the same calls.
  size_t begin = 0;
  for (size_t i = 0; i < n; ++i) {
    if (job.tensors[i].count * DataTypeSize(job.dtype) < direct_bytes_) continue;
    if (begin < i) KOLO_RETURN_IF_ERROR(RunPieces(comm, algorithm, job, begin, i, observer));
    KOLO_RETURN_IF_ERROR(RunDirect(comm, algorithm, job, i, observer));
    begin = i + 1;
  }
  if (begin < n) return RunPieces(comm, algorithm, job, begin, n, observer);
  return Status::OK();
}

Status FusionExecutor::RunList(Communicator& comm, AllreduceAlgorithm& algorithm,
                               const AllreduceJob& job, ExecutorObserver* observer) {
  std::vector<AllreducePart>& parts = parts_;  // kept between calls: no allocation per call
  parts.clear();
  for (const FusedTensor& t : job.tensors) {
    parts.push_back(AllreducePart{t.input, t.output, t.count});
    // As RunDirect: the prescaled input goes into the output, which is then reduced in place.
    if (job.prescale != 1.0) {
      KOLO_RETURN_IF_ERROR(ScaleCopy(t.output, t.input, t.count, job.dtype, job.prescale));
      parts.back().send = t.output;
    }
  }
  const double scale = FoldedScale(comm, algorithm, job);
  const bool scaled = scale != 1.0;
  {
    StageScope reduce(observer, ExecutorObserver::Stage::kReduce, 0, job.tensors.size() - 1);
    KOLO_RETURN_IF_ERROR(algorithm.RunList(comm, parts, job.dtype, WireOp(job.op), scale));
  }
  if (scaled) return Status::OK();
  for (const FusedTensor& t : job.tensors) {
    KOLO_RETURN_IF_ERROR(Finish(t.output, t.output, t.count, job, comm.Size()));
  }
  return Status::OK();
}

Status FusionExecutor::RunDirect(Communicator& comm, AllreduceAlgorithm& algorithm,
                                 const AllreduceJob& job, size_t index,
                                 ExecutorObserver* observer) {
  const FusedTensor& t = job.tensors[index];
  AllreduceArgs args{t.input, t.output, t.count, job.dtype, WireOp(job.op)};
  if (job.prescale != 1.0) {
    KOLO_RETURN_IF_ERROR(ScaleCopy(t.output, t.input, t.count, job.dtype, job.prescale));
    args.send = t.output;
  }
  const double scale = FoldedScale(comm, algorithm, job);
  const bool scaled = scale != 1.0;
  {
    StageScope reduce(observer, ExecutorObserver::Stage::kReduce, index, index);
    KOLO_RETURN_IF_ERROR(scaled ? algorithm.RunScaled(comm, args, scale)
                                : algorithm.Run(comm, args));
  }
  if (scaled) return Status::OK();
  return Finish(t.output, t.output, t.count, job, comm.Size());
}

Status FusionExecutor::RunPieces(Communicator& comm, AllreduceAlgorithm& algorithm,
                                 const AllreduceJob& job, size_t begin, size_t end,
                                 ExecutorObserver* observer) {
  KOLO_RETURN_IF_ERROR(buffer_.Reserve(piece_bytes_));
  const DataType wire = WireType(job.dtype);
  const size_t wsize = DataTypeSize(wire);
  const size_t esize = DataTypeSize(job.dtype);
  const size_t piece = std::max<size_t>(1, piece_bytes_ / wsize);
  char* buf = buffer_.data();

  size_t total = 0;
  for (size_t i = begin; i < end; ++i) total += job.tensors[i].count;

  // Cursor over the tensors: tensor index and element offset inside it.
  size_t ti = begin, toff = 0;
  for (size_t start = 0; start < total; start += piece) {
    const size_t n = std::min(piece, total - start);
    // Pack [start, start+n) of the concatenation.
    const size_t pack_ti = ti, pack_toff = toff;
    const size_t last = observer ? LastTensor(job.tensors, ti, toff, n) : 0;
    std::optional<StageScope> stage;
    stage.emplace(observer, ExecutorObserver::Stage::kPack, pack_ti, last);
    for (size_t filled = 0; filled < n;) {
      const FusedTensor& t = job.tensors[ti];
      const size_t take = std::min(n - filled, t.count - toff);
      const char* src = static_cast<const char*>(t.input) + toff * esize;
      if (IsHalf(job.dtype)) {
        WidenToFloat32(reinterpret_cast<float*>(buf) + filled, src, take, job.dtype,
                       static_cast<float>(job.prescale));
      } else {
        KOLO_RETURN_IF_ERROR(ScaleCopy(buf + filled * wsize, src, take, job.dtype, job.prescale));
      }
      filled += take;
      toff += take;
      if (toff == t.count) {
        ++ti;
        toff = 0;
      }
    }
    // Skip the empty tensors that follow, so the cursor always points at data.
    while (ti < end && job.tensors[ti].count == 0) ++ti;

    stage.emplace(observer, ExecutorObserver::Stage::kReduce, pack_ti, last);
    KOLO_RETURN_IF_ERROR(algorithm.Run(comm, AllreduceArgs{buf, buf, n, wire, WireOp(job.op)}));

    // Unpack the same range.
    stage.emplace(observer, ExecutorObserver::Stage::kUnpack, pack_ti, last);
    size_t ui = pack_ti, uoff = pack_toff;
    for (size_t done = 0; done < n;) {
      const FusedTensor& t = job.tensors[ui];
      const size_t take = std::min(n - done, t.count - uoff);
      char* dst = static_cast<char*>(t.output) + uoff * esize;
      KOLO_RETURN_IF_ERROR(Finish(dst, buf + done * wsize, take, job, comm.Size()));
      done += take;
      uoff += take;
      if (uoff == t.count) {
        ++ui;
        uoff = 0;
      }
    }
  }
  return Status::OK();
}

Status FusionExecutor::RunAdasum(Communicator& comm, AdasumAllreduce& adasum,
                                 const AllreduceJob& job, ExecutorObserver* observer) {
  if (job.tensors.empty()) return Status::OK();
  // One tensor in a wide dtype: in its own buffers, as any other algorithm runs it.
  if (job.tensors.size() == 1 && !IsHalf(job.dtype)) {
    return RunDirect(comm, adasum, job, 0, observer);
  }
  const DataType wire = WireType(job.dtype);
  const size_t wsize = DataTypeSize(wire);
  std::vector<size_t> counts;
  size_t total = 0;
  for (const FusedTensor& t : job.tensors) {
    counts.push_back(t.count);
    total += t.count;
  }
  if (total == 0) return Status::OK();  // the same on every rank: nothing to exchange
  KOLO_RETURN_IF_ERROR(whole_.Reserve(total * wsize));
  char* buf = whole_.data();
  const size_t last = job.tensors.size() - 1;
  std::optional<StageScope> stage;
  stage.emplace(observer, ExecutorObserver::Stage::kPack, 0, last);
  size_t at = 0;
  for (const FusedTensor& t : job.tensors) {
    if (IsHalf(job.dtype)) {
      WidenToFloat32(reinterpret_cast<float*>(buf) + at, t.input, t.count, job.dtype,
                     static_cast<float>(job.prescale));
    } else {
      KOLO_RETURN_IF_ERROR(ScaleCopy(buf + at * wsize, t.input, t.count, job.dtype, job.prescale));
    }
    at += t.count;
  }
  stage.emplace(observer, ExecutorObserver::Stage::kReduce, 0, last);
  KOLO_RETURN_IF_ERROR(
      adasum.RunFused(comm, AllreduceArgs{buf, buf, total, wire, ReduceOp::kAdasum}, counts));
  stage.emplace(observer, ExecutorObserver::Stage::kUnpack, 0, last);
  at = 0;
  for (const FusedTensor& t : job.tensors) {
    KOLO_RETURN_IF_ERROR(Finish(t.output, buf + at * wsize, t.count, job, comm.Size()));
    at += t.count;
  }
  return Status::OK();
}

}  // namespace kolo
