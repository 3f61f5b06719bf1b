// reducescatter, alltoall and barrier: submission checks and execution.
//
// reducescatter: the reduction of every rank's [n, ...] tensor, cut along the first dimension;
//   rank r keeps rows [start_r, start_r + share_r), share_r = n / size, plus one for the first
//   n % size ranks (Horovod 0.28's ReducescatterOp::ComputeOutputShapeForRank). Scaling and
//   Average follow allreduce exactly: prescale before, Sum on the wire, then Average's division
//   and postscale (floats: one multiplication by postscale / size; integers: DivideCopy, which
//   truncates toward zero, then ScaleCopy). float16/bfloat16 are widened to float32 (prescale
//   applied there), reduced in float32 and rounded to the 16-bit type once, at the end.
// alltoall: rank r sends rows [sum(splits_r[0..q)), +splits_r[q]) to rank q and receives
//   from every q the rows q addressed to it, in rank order. The coordinator carries every
//   rank's splits (a size x size matrix) in the Response; the received splits are column r.
// barrier: negotiated like any name, then comm.Barrier() in Response order.
// CUDA tensors of reducescatter and alltoall take the device path (runtime/device/device_ops.h, run
// from runtime_device.cc); the parts computed here are shared with it.
#include "runtime/operations.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "collectives/reduce.h"

namespace kolo {
namespace {

struct Malloced {
  std::unique_ptr<void, OutputBuffer::Free> p;
  explicit Malloced(size_t bytes) : p(std::malloc(bytes ? bytes : 1)) {}
  char* get() const { return static_cast<char*>(p.get()); }
};

int64_t RowElements(const std::vector<int64_t>& shape) {
  int64_t row = 1;
  for (size_t i = 1; i < shape.size(); ++i) row *= shape[i];
  return row;
}

}  // namespace

int64_t ReducescatterShare(int64_t rows, int rank, int size) {
  return rows / size + (rank < rows % size ? 1 : 0);
}

std::vector<int64_t> ResolvedSplits(const Submission& s, int size) {
  if (!s.splits.empty()) return s.splits;
  return std::vector<int64_t>(size, s.shape.empty() ? 0 : s.shape[0] / size);
}

AllgatherParts AllgatherPartsOf(const Response& response, const Request& request) {
  const size_t row_bytes =
      static_cast<size_t>(RowElements(request.shape)) * DataTypeSize(response.dtype);
  AllgatherParts parts;
  for (int64_t d : response.first_dims) {
    parts.bytes.push_back(static_cast<size_t>(d) * row_bytes);
    parts.rows += d;
  }
  return parts;
}

StatusOr<AlltoallParts> AlltoallPartsOf(const Response& response, const Request& request,
                                        int rank, int size) {
  const std::vector<int64_t>& m = response.splits;
  if (m.size() != static_cast<size_t>(size) * size ||
      request.splits.size() != static_cast<size_t>(size) ||
      !std::equal(request.splits.begin(), request.splits.end(), m.begin() + rank * size)) {
    return InternalError("the coordinator's splits disagree with rank " + std::to_string(rank) +
                         "'s");
  }
  const size_t row_bytes =
      static_cast<size_t>(RowElements(request.shape)) * DataTypeSize(response.dtype);
  AlltoallParts parts;
  parts.send_bytes.resize(size);
  parts.recv_bytes.resize(size);
  parts.received.resize(size);
  for (int q = 0; q < size; ++q) {
    parts.send_bytes[q] = static_cast<size_t>(m[rank * size + q]) * row_bytes;
    parts.received[q] = m[q * size + rank];
    parts.recv_bytes[q] = static_cast<size_t>(parts.received[q]) * row_bytes;
    parts.rows += parts.received[q];  // bounded by the coordinator
  }
  return parts;
}

std::vector<size_t> ReducescatterCounts(const std::vector<int64_t>& shape, int size) {
  const size_t row = static_cast<size_t>(RowElements(shape));
  std::vector<size_t> counts(size);
  for (int r = 0; r < size; ++r) {
    counts[r] = static_cast<size_t>(ReducescatterShare(shape[0], r, size)) * row;
  }
  return counts;
}

Status Runtime::ExecuteReducescatter(const Response& response, TensorEntry& entry) {
  const std::string what = "reducescatter '" + entry.request.name + "'";
  const std::vector<int64_t>& shape = entry.request.shape;
  const int size = data_->Size(), rank = data_->Rank();
  const DataType dtype = response.dtype;
  const bool half = IsHalf(dtype);
  const DataType wire = half ? DataType::kFloat32 : dtype;
  const size_t total = static_cast<size_t>(NumElements(shape));
  const std::vector<size_t> counts = ReducescatterCounts(shape, size);
  const size_t mine = counts[rank];
  OutputBuffer out;
  out.data.reset(std::malloc(mine ? mine * DataTypeSize(dtype) : 1));
  // Prescaled (or widened) input, and the float32 result of a 16-bit type.
  const bool scaled = half || response.prescale != 1.0;
  Malloced send_scratch(scaled ? total * DataTypeSize(wire) : 0);
  Malloced recv_scratch(half ? mine * sizeof(float) : 0);
  if (!out.data || !send_scratch.p || !recv_scratch.p) {
    return ResourceExhaustedError(what + ": cannot allocate the output and scratch buffers");
  }
  const void* send = entry.input;
  if (half) {
    WidenToFloat32(reinterpret_cast<float*>(send_scratch.get()), entry.input, total, dtype,
                   static_cast<float>(response.prescale));
    send = send_scratch.get();
  } else if (scaled) {
    KOLO_RETURN_IF_ERROR(
        ScaleCopy(send_scratch.get(), entry.input, total, dtype, response.prescale)
            .AddContext(what));
    send = send_scratch.get();
  }
  void* recv = half ? static_cast<void*>(recv_scratch.get()) : out.data.get();
  const LoweredReduce lowered = LowerReduce(response.reduce_op, response.postscale, size);
  Status s = collectives_.ReduceScatter(*data_, send, recv, counts, wire, lowered.wire_op);
  if (!s.ok()) return s.AddContext(what);

  if (half) {
    NarrowFromFloat32(out.data.get(), reinterpret_cast<const float*>(recv), mine, dtype,
                      static_cast<float>(lowered.float_postscale));
  } else if (IsFloatingPoint(dtype)) {
    s = ScaleCopy(recv, recv, mine, dtype, lowered.float_postscale);
  } else {
    if (lowered.integer_divisor != 1) {
      s = DivideCopy(recv, recv, mine, dtype, lowered.integer_divisor);
    }
    if (s.ok()) s = ScaleCopy(recv, recv, mine, dtype, lowered.integer_postscale);
  }
  if (!s.ok()) return s.AddContext(what);
  out.shape = shape;
  out.shape[0] = ReducescatterShare(shape[0], rank, size);
  entry.handle->output() = std::move(out);
  return Status::OK();
}

Status Runtime::ExecuteAlltoall(const Response& response, TensorEntry& entry) {
  const std::string what = "alltoall '" + entry.request.name + "'";
  auto parts = AlltoallPartsOf(response, entry.request, data_->Rank(), data_->Size());
  if (!parts.ok()) return Status(parts.status()).AddContext(what);
  const size_t total = std::accumulate(parts->recv_bytes.begin(), parts->recv_bytes.end(),
                                       size_t{0});
  OutputBuffer out;
  out.data.reset(std::malloc(total ? total : 1));
  if (!out.data) {
    return ResourceExhaustedError(what + ": cannot allocate " + std::to_string(total) +
                                  " bytes for the output");
  }
  Status s = collectives_.Alltoallv(*data_, entry.input, parts->send_bytes, out.data.get(),
                                    parts->recv_bytes);
  if (!s.ok()) return s.AddContext(what);
  out.shape = entry.request.shape;
  out.shape[0] = parts->rows;
  out.splits = std::move(parts->received);
  entry.handle->output() = std::move(out);
  return Status::OK();
}

Status Runtime::Barrier() {
  Submission s;
  s.op = OpType::kBarrier;
  s.name = kBarrierPrefix + std::to_string(barriers_.fetch_add(1));
  s.dtype = DataType::kUInt8;
  s.shape = {0};
  auto handle = Enqueue(s);
  if (!handle.ok()) return handle.status();
  return (*handle)->Wait();
}

}  // namespace kolo
