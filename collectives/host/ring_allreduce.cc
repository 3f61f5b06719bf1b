#include "collectives/host/ring_allreduce.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "collectives/host/flat_common.h"
#include "collectives/reduce.h"

namespace kolo {
namespace {

constexpr int kRingTag = 0x6b72;

// The plan of one ring all-reduce, shared by the cost model and Run.
struct RingPlan {
  size_t p, count, esize;
  size_t seg;       // elements per segment
  size_t segments;  // K: segments per chunk (of the largest chunk)

  RingPlan(size_t ranks, size_t n, size_t element_bytes, size_t segment_bytes)
      : p(ranks), count(n), esize(element_bytes) {
    seg = std::max<size_t>(1, segment_bytes / esize);
    const size_t largest = (count + p - 1) / p;
    segments = std::max<size_t>(1, (largest + seg - 1) / seg);
  }
  // Elements [first, first + n) of the buffer: segment k of chunk c (n may be 0 when the
  // chunk is shorter than the largest).
  void Segment(size_t c, size_t k, size_t* first, size_t* n) const {
    const size_t len = internal::BlockCount(count, p, c);
    const size_t lo = std::min(len, k * seg), hi = std::min(len, (k + 1) * seg);
    *first = internal::BlockOffset(count, p, c) + lo;
    *n = hi - lo;
  }
};

// Item i of the schedule: step i / K (reduce-scatter steps first), segment i % K.
struct RingItem {
  bool reduce;  // reduce-scatter (reduce what arrives) or all-gather (store it)
  size_t step, segment;
  size_t send_first, send_n, recv_first, recv_n;
};

RingItem ItemOf(const RingPlan& plan, size_t rank, size_t i) {
  RingItem it;
  const size_t p = plan.p;
  it.step = i / plan.segments;
  it.segment = i % plan.segments;
  it.reduce = it.step < p - 1;
  const size_t s = it.reduce ? it.step : it.step - (p - 1);
  // Chunk indices mod p, kept non-negative by adding p (s <= p - 2).
  const size_t send_chunk = it.reduce ? (rank + p - s) % p : (rank + 1 + p - s) % p;
  const size_t recv_chunk = it.reduce ? (rank + 2 * p - s - 1) % p : (rank + p - s) % p;
  plan.Segment(send_chunk, it.segment, &it.send_first, &it.send_n);
  plan.Segment(recv_chunk, it.segment, &it.recv_first, &it.recv_n);
  return it;
}

std::string Where(const RingPlan& plan, const RingItem& it) {
  const size_t steps = plan.p - 1;
  return std::string("ring ") + (it.reduce ? "reduce-scatter" : "all-gather") + " step " +
         std::to_string((it.reduce ? it.step : it.step - steps) + 1) + "/" + std::to_string(steps) +
         " segment " + std::to_string(it.segment + 1) + "/" + std::to_string(plan.segments);
}

}  // namespace

Status RingAllreduce::Supports(const SelectionInput& in) const {
  return internal::SupportsKernelOp(Name(), in);
}

double RingAllreduce::EstimateMicros(const SelectionInput& in) const {
  if (in.ranks <= 1) return 0;
  const double p = in.ranks;
  const double n = static_cast<double>(in.bytes);
  const size_t esize = std::max<size_t>(1, DataTypeSize(in.dtype));
  const RingPlan plan(in.ranks, in.count, esize, segment_bytes_);
  const LinkCost link = RingLink(in);
  return 2 * (p - 1) * plan.segments * link.alpha_us + 2 * (p - 1) / p * n * link.beta_us +
         (p - 1) / p * n * in.cost->gamma_us;
}

Status RingAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  return RingAllreduce::RunWithPostscale(comm, args, 1.0);  // not a subclass's
}

Status RingAllreduce::RunWithPostscale(Communicator& comm, const AllreduceArgs& args,
                                       double postscale) {
  const size_t esize = DataTypeSize(args.dtype);
  char* buf = static_cast<char*>(args.recv);
  const int p = comm.Size();
  if (p == 1 || args.count == 0) {
    return ScaleCopy(buf, args.send, args.count, args.dtype, postscale);
  }
  if (args.send != args.recv) std::memcpy(buf, args.send, args.count * esize);

  const RingPlan plan(p, args.count, esize, segment_bytes_);
  const size_t rank = comm.Rank();
  const int next = (comm.Rank() + 1) % p, prev = (comm.Rank() + p - 1) % p;
  const size_t slot_bytes = std::min(plan.seg, (args.count + p - 1) / p) * esize;
  char* slots[2];
  slots[0] = internal::GrowScratch(&scratch_, 2 * slot_bytes);
  slots[1] = slots[0] + slot_bytes;

  auto start = [&](size_t i, std::unique_ptr<P2PBatch>* batch) -> Status {
    const RingItem it = ItemOf(plan, rank, i);
    // Reduce-scatter receives into a scratch slot (its chunk still holds our own data);
    // all-gather receives straight into place.
    void* into = it.reduce ? slots[i % 2] : buf + it.recv_first * esize;
    auto started =
        comm.Start({P2POp::Recv(into, it.recv_n * esize, prev, kRingTag),
                    P2POp::Send(buf + it.send_first * esize, it.send_n * esize, next, kRingTag)});
    if (!started.ok()) return Status(started.status()).AddContext(Where(plan, it));
    *batch = std::move(*started);
    return Status::OK();
  };

  // Item i + 1 sends the segment item i + 1 - K reduced; that is finished before item i is
  // reduced only when K >= 2.
  const bool overlap = plan.segments >= 2;
  const size_t items = 2 * (p - 1) * plan.segments;
  std::unique_ptr<P2PBatch> batch;
  KOLO_RETURN_IF_ERROR(start(0, &batch));
  for (size_t i = 0; i < items; ++i) {
    const RingItem it = ItemOf(plan, rank, i);
    KOLO_RETURN_IF_ERROR(batch->Wait().AddContext(Where(plan, it)));
    std::unique_ptr<P2PBatch> following;
    if (overlap && i + 1 < items) KOLO_RETURN_IF_ERROR(start(i + 1, &following));
    if (it.reduce && it.recv_n) {
      // The last reduce-scatter step finishes the chunk: the postscale goes into that pass,
      // and the all-gather passes the scaled values on.
      char* chunk = buf + it.recv_first * esize;
      const double scale = it.step == static_cast<size_t>(p) - 2 ? postscale : 1.0;
      const Status reduced =
          scale == 1.0
              ? ReduceInto(chunk, slots[i % 2], it.recv_n, args.dtype, args.op)
              : ReducePairScaled(chunk, chunk, slots[i % 2], it.recv_n, args.dtype, args.op, scale);
      KOLO_RETURN_IF_ERROR(Status(reduced).AddContext(Where(plan, it)));
    }
    if (!overlap && i + 1 < items) KOLO_RETURN_IF_ERROR(start(i + 1, &following));
    batch = std::move(following);
  }
  return Status::OK();
}

}  // namespace kolo
