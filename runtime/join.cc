// join (Horovod's): a rank that ran out of data calls Runtime::Join; until every rank has
// joined, the others' allreduces go on with the joined ranks contributing the identity.
//
//   rank that joined                          coordinator (coordinator.h)
//   Enqueue(kJoin "__kolo_join.<n>")  ----->  joined set += rank; names that every rank has
//   (later submissions refused)               submitted or joined are ready:
//                                               allreduce -> normal Response (identity from
//                                                            the joined non-submitters)
//                                               other ops -> error "rank(s) r joined ..."
//   allreduce Response naming tensors  <----  when the last rank joins: the pending names,
//   it never submitted: identity-filled        then kJoin{root = last joiner}; set cleared
//   buffers, the same executor call
//   kJoin: Join() returns root
//
// The identity buffers are allocated per Response (join is rare; nothing is kept).
#include <cstring>
#include <limits>

#include "base/logging.h"
#include "collectives/reduce.h"
#include "runtime/operations.h"

namespace kolo {
namespace {

template <typename T>
void Fill(void* dst, size_t count, T v) {
  T* p = static_cast<T*>(dst);
  for (size_t i = 0; i < count; ++i) p[i] = v;
}

// The identity of Min (largest) or Max (lowest) for T.
template <typename T>
T Extreme(bool largest) {
  if constexpr (std::numeric_limits<T>::has_infinity) {
    return largest ? std::numeric_limits<T>::infinity() : -std::numeric_limits<T>::infinity();
  } else {
    return largest ? std::numeric_limits<T>::max() : std::numeric_limits<T>::lowest();
  }
}

template <typename T>
void FillTyped(void* dst, size_t count, ReduceOp op) {
  if (op == ReduceOp::kProduct) {
    Fill<T>(dst, count, T(1));
  } else {
    Fill<T>(dst, count, Extreme<T>(op == ReduceOp::kMin));
  }
}

}  // namespace

void FillIdentity(void* dst, size_t count, DataType dtype, ReduceOp op) {
  if (count == 0) return;
  // Zero is Adasum's identity too: a zero vector's coefficient is 1 and it adds nothing.
  if (op == ReduceOp::kSum || op == ReduceOp::kAverage || op == ReduceOp::kAdasum) {
    std::memset(dst, 0, count * DataTypeSize(dtype));  // 0, +0.0 and false in every dtype
    return;
  }
  const bool min = op == ReduceOp::kMin, product = op == ReduceOp::kProduct;
  switch (dtype) {
    case DataType::kUInt8: FillTyped<uint8_t>(dst, count, op); return;
    case DataType::kInt8: FillTyped<int8_t>(dst, count, op); return;
    case DataType::kUInt16: FillTyped<uint16_t>(dst, count, op); return;
    case DataType::kInt16: FillTyped<int16_t>(dst, count, op); return;
    case DataType::kInt32: FillTyped<int32_t>(dst, count, op); return;
    case DataType::kInt64: FillTyped<int64_t>(dst, count, op); return;
    case DataType::kFloat32: FillTyped<float>(dst, count, op); return;
    case DataType::kFloat64: FillTyped<double>(dst, count, op); return;
    case DataType::kBool:  // Min and Product are AND, Max is OR
      Fill<uint8_t>(dst, count, min || product ? 1 : 0);
      return;
    case DataType::kFloat16:  // 1.0, +inf, -inf
      Fill<uint16_t>(dst, count, product ? 0x3C00 : min ? 0x7C00 : 0xFC00);
      return;
    case DataType::kBFloat16:
      Fill<uint16_t>(dst, count, product ? 0x3F80 : min ? 0x7F80 : 0xFF80);
      return;
  }
}

Status CheckElementCount(const std::string& what, const TensorEntry& e, size_t count) {
  if (static_cast<size_t>(NumElements(e.request.shape)) == count) return Status::OK();
  return InternalError(what + ": '" + e.request.name + "' has " +
                       std::to_string(NumElements(e.request.shape)) +
                       " elements here, the coordinator says " + std::to_string(count));
}

Status JoinedAllreduceJob(const Response& response, const std::vector<TensorEntry>& entries,
                          AllreduceJob* job, JoinedScratch* scratch) {
  const std::string what =
      "allreduce '" + (entries.empty() ? response.names[0] : entries[0].request.name) + "'";
  if (response.counts.size() != entries.size()) {
    return InternalError(what + ": the Response has " + std::to_string(response.counts.size()) +
                         " counts for " + std::to_string(entries.size()) + " tensors");
  }
  // Zeros are the identity after any prescale; the other identities are not.
  const bool sum =
      job->op == ReduceOp::kSum || job->op == ReduceOp::kAverage || job->op == ReduceOp::kAdasum;
  const double prescale = job->prescale;
  if (!sum) job->prescale = 1.0;
  const size_t esize = DataTypeSize(response.dtype);
  auto allocate = [&](size_t count) -> void* {
    scratch->buffers.emplace_back(std::malloc(count ? count * esize : 1));
    return scratch->buffers.back().get();
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    const size_t count = static_cast<size_t>(response.counts[i]);
    const TensorEntry& e = entries[i];
    if (!e.handle) {
      void* buf = allocate(count);
      if (!buf) {
        return ResourceExhaustedError(what + ": cannot allocate " + std::to_string(count * esize) +
                                      " bytes for the joined rank's identity");
      }
      FillIdentity(buf, count, response.dtype, response.reduce_op);
      job->tensors.push_back(FusedTensor{buf, buf, count});
      continue;
    }
    KOLO_RETURN_IF_ERROR(CheckElementCount(what, e, count));
    const void* input = e.input;
    if (!sum && prescale != 1.0 && count) {
      void* buf = allocate(count);
      if (!buf) {
        return ResourceExhaustedError(what + ": cannot allocate " + std::to_string(count * esize) +
                                      " bytes to prescale '" + e.request.name + "'");
      }
      KOLO_RETURN_IF_ERROR(ScaleCopy(buf, e.input, count, response.dtype, prescale)
                               .AddContext("prescaling '" + e.request.name + "'"));
      input = buf;
    }
    job->tensors.push_back(FusedTensor{input, e.output, count});
  }
  return Status::OK();
}

void Runtime::ExecuteJoin(const Response& response) {
  std::string name;
  {
    std::lock_guard<std::mutex> lock(join_mu_);
    name.swap(join_name_);
  }
  TensorEntry e = queue_.Take(name);
  if (name.empty() || !e.handle) {
    KOLO_LOG_ERROR("runtime", "every rank has joined, but rank {} has no pending join",
                   layout_.rank);
    return;
  }
  last_joined_ = response.root;
  Finish(e, Status::OK());
}

StatusOr<int> Runtime::Join(int device) {
  join_device_ = device;
  Submission s;
  s.op = OpType::kJoin;
  s.name = kJoinPrefix + std::to_string(joins_.fetch_add(1));
  s.dtype = DataType::kUInt8;
  s.shape = {0};
  auto handle = Enqueue(s);
  if (!handle.ok()) return handle.status();
  const Status& status = (*handle)->Wait();
  if (!status.ok()) return status;
  return last_joined_.load();
}

}  // namespace kolo
