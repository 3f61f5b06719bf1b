// The C API's submissions: kolo_submit and kolo_submit_group, which take an operation as the
// fields of a kolo_op_args_t, and the functions of kolo.h that take them as parameters, each a
// thin wrapper that fills a kolo_op_args_t. Everything a submission is checked for here is what
// the Runtime cannot see (NULL pointers, out-of-range enum codes, fields the collective does not
// read); Runtime::Enqueue checks the rest.
#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings/c/api_state.h"
#include "kolo/kolo.h"
#include "runtime/runtime.h"

using kolo::capi::Fail;
using kolo::capi::LastError;

namespace {

// A submission this layer refuses: this rank's error is "<label>: <why>", and set
// `process_set`'s coordinator hears that this rank refused each of `names` because of `why`, so
// the peers' submissions of them fail naming this rank instead of waiting for it
// (Runtime::Refuse). Returns why's code.
kolo_status_t Refuse(int process_set, kolo::OpType op, const std::string& label,
                     const std::vector<const char*>& names, const kolo::Status& why) {
  const kolo_status_t code = Fail(kolo::Status(why.code(), label + ": " + why.message()));
  kolo::Status unused;
  auto runtime = kolo::capi::RuntimeOf(process_set, "", &unused);
  for (const char* name : names) {
    // A reserved name cannot be announced; the refusal itself was already reported.
    if (runtime && name && *name) (void)runtime->Refuse(op, name, why.message());
  }
  return code;
}

// `splits` (alltoall): NULL, or one entry per rank, copied once the size is known.
kolo_status_t Submit(kolo::Submission sub, int ndim, const int64_t* shape,
                     kolo_handle_t* handle, const int64_t* splits = nullptr,
                     int process_set = 0) {
  LastError().clear();
  if (!handle) return Fail(kolo::InvalidArgumentError("handle pointer is NULL"));
  *handle = nullptr;
  if (!sub.name.size()) {
    return Fail(kolo::InvalidArgumentError(std::string(kolo::OpTypeName(sub.op)) +
                                           ": name is NULL or empty"));
  }
  if (ndim < 0 || ndim > KOLO_MAX_DIMS || (ndim > 0 && !shape)) {
    return Refuse(process_set, sub.op, kolo::OpLabel(sub.op, sub.name), {sub.name.c_str()},
                  kolo::InvalidArgumentError("ndim " + std::to_string(ndim) + " outside [0, " +
                                             std::to_string(KOLO_MAX_DIMS) +
                                             "] or shape is NULL"));
  }
  sub.shape.assign(shape, shape + ndim);
  kolo::Status why;
  auto runtime = kolo::capi::RuntimeOf(
      process_set, kolo::OpLabel(sub.op, sub.name), &why);
  if (!runtime) return Fail(why);
  if (splits) sub.splits.assign(splits, splits + runtime->layout().size);
  auto h = runtime->Enqueue(sub);
  if (!h.ok()) return Fail(h.status());
  *handle = new kolo_handle_s{std::move(h).value()};
  return KOLO_SUCCESS;
}

// The fields every submission has; the callers add their operation's own.
kolo::Submission NewSubmission(kolo::OpType op, const char* name, const void* input,
                               kolo_dtype_t dtype) {
  kolo::Submission sub;
  sub.op = op;
  sub.name = name ? name : "";
  sub.input = input;
  sub.dtype = static_cast<kolo::DataType>(dtype);
  return sub;
}

kolo::Status CheckReduceOp(int op) {
  if (kolo::IsValidReduceOp(op)) return kolo::Status::OK();
  return kolo::InvalidArgumentError("unknown reduce op " + std::to_string(op));
}

kolo::Status CheckDtype(int dtype) {
  if (kolo::IsValidDataType(dtype)) return kolo::Status::OK();
  return kolo::InvalidArgumentError("unknown dtype " + std::to_string(dtype));
}

// A binding's `device` (kolo.h, KOLO_DEVICE_*): detect, host, or a CUDA ordinal.
kolo::Status CheckDevice(int device) {
  if (device >= KOLO_DEVICE_DETECT) return kolo::Status::OK();
  return kolo::InvalidArgumentError("device " + std::to_string(device) +
                                    " is none of KOLO_DEVICE_DETECT, KOLO_DEVICE_HOST or a "
                                    "CUDA ordinal");
}

// An enum field of the caller's struct, read as its integer: a caller's out-of-range code must
// be refused, and loading it as the enum type is already undefined behaviour.
template <typename Enum>
int RawCode(const Enum& field) {
  std::underlying_type_t<Enum> raw;
  std::memcpy(&raw, &field, sizeof raw);
  return static_cast<int>(raw);
}

// The first version of kolo_op_args_t ends with cuda_stream; later versions add fields after it.
constexpr size_t kOpArgsFirstSize = offsetof(kolo_op_args_t, cuda_stream) + sizeof(void*);

// *out = the caller's args, fields beyond its `size` at their defaults.
kolo_status_t ReadArgs(const kolo_op_args_t* args, const char* what, kolo_op_args_t* out) {
  if (!args) return Fail(kolo::InvalidArgumentError(std::string(what) + ": args is NULL"));
  if (args->size < kOpArgsFirstSize || args->size > sizeof(kolo_op_args_t)) {
    return Fail(kolo::InvalidArgumentError(
        std::string(what) + ": args->size " + std::to_string(args->size) + " is not the size of " +
        "a kolo_op_args_t this library knows (" + std::to_string(kOpArgsFirstSize) + " to " +
        std::to_string(sizeof(kolo_op_args_t)) + "); start from KOLO_OP_ARGS_INIT"));
  }
  *out = KOLO_OP_ARGS_INIT;
  std::memcpy(out, args, args->size);
  out->size = sizeof(kolo_op_args_t);
  return KOLO_SUCCESS;
}

bool Reduces(kolo::OpType op) {
  return op == kolo::OpType::kAllreduce || op == kolo::OpType::kReducescatter;
}

// The fields `a`'s collective does not read must keep their defaults; "" when they do, else the
// first one set.
std::string UnreadFieldSet(kolo::OpType op, const kolo_op_args_t& a) {
  const bool writes_output = op == kolo::OpType::kAllreduce || op == kolo::OpType::kBroadcast;
  if (!writes_output && a.output) return "output (kolo allocates this collective's output)";
  if (!Reduces(op) && RawCode(a.reduce_op) != KOLO_OP_SUM) return "reduce_op";
  if (!Reduces(op) && (a.prescale_factor != 1.0 || a.postscale_factor != 1.0)) {
    return "prescale_factor or postscale_factor";
  }
  if (op != kolo::OpType::kBroadcast && a.root_rank != 0) return "root_rank";
  if (op != kolo::OpType::kAlltoall && a.splits) return "splits";
  return "";
}

// The collective of `a`, checked; Fail()s otherwise.
kolo_status_t CollectiveOf(const kolo_op_args_t& a, const char* what, kolo::OpType* op) {
  const int code = RawCode(a.collective);
  if (code < KOLO_COLLECTIVE_ALLREDUCE || code > KOLO_COLLECTIVE_ALLTOALL) {
    return Fail(kolo::InvalidArgumentError(std::string(what) + " '" + (a.name ? a.name : "") +
                                           "': unknown collective " + std::to_string(code)));
  }
  *op = static_cast<kolo::OpType>(code);  // kolo_collective_t's values are OpType's
  return KOLO_SUCCESS;
}

// Everything of one tensor but the shape and the runtime: the codes and the fields. A refusal
// is why, without the operation's label.
kolo::Status Describe(const kolo_op_args_t& a, kolo::OpType op, kolo::Submission* sub) {
  KOLO_RETURN_IF_ERROR(CheckDtype(RawCode(a.dtype)));
  if (Reduces(op)) KOLO_RETURN_IF_ERROR(CheckReduceOp(RawCode(a.reduce_op)));
  KOLO_RETURN_IF_ERROR(CheckDevice(a.device));
  const std::string unread = UnreadFieldSet(op, a);
  if (!unread.empty()) {
    return kolo::InvalidArgumentError(unread + " is set, which " +
                                      std::string(kolo::OpTypeName(op)) + " does not read");
  }
  *sub = NewSubmission(op, a.name, a.input, static_cast<kolo_dtype_t>(RawCode(a.dtype)));
  sub->output = a.output;
  if (Reduces(op)) {
    sub->reduce_op = static_cast<kolo::ReduceOp>(RawCode(a.reduce_op));
    sub->prescale = a.prescale_factor;
    sub->postscale = a.postscale_factor;
  }
  sub->root = a.root_rank;
  sub->device = a.device;
  sub->ready_stream = a.cuda_stream;
  return kolo::Status::OK();
}


// kolo_submit_group after its checks: `group` holds each member's Submission but its shape,
// `members` the caller's fields. Checks names and shapes and enqueues the group.
kolo_status_t SubmitGroup(kolo::OpType op, const std::vector<kolo_op_args_t>& members,
                          std::vector<kolo::Submission> group,
                          const std::vector<const char*>& names, kolo_handle_t* handles) {
  const int process_set = members[0].process_set_id;
  const int count = static_cast<int>(members.size());
  const std::string what = "grouped " + std::string(kolo::OpTypeName(op));
  for (int i = 0; i < count; ++i) {
    const kolo_op_args_t& m = members[static_cast<size_t>(i)];
    kolo::Submission& sub = group[static_cast<size_t>(i)];
    if (sub.name.empty() || m.ndim < 0 || m.ndim > KOLO_MAX_DIMS || (m.ndim > 0 && !m.shape)) {
      // A member refused here refuses the group, announced for every named member (as
      // Runtime::EnqueueGroup does), so the peers' group fails instead of waiting.
      return Refuse(process_set, op, what, names,
                    kolo::InvalidArgumentError(
                        "tensor " + std::to_string(i) + " ('" + sub.name + "'): empty name, ndim " +
                        std::to_string(m.ndim) + " outside [0, " + std::to_string(KOLO_MAX_DIMS) +
                        "] or shape is NULL"));
    }
    sub.shape.assign(m.shape, m.shape + m.ndim);
  }
  kolo::Status why;
  auto runtime =
      kolo::capi::RuntimeOf(process_set, what + " '" + group[0].name + "'", &why);
  if (!runtime) return Fail(why);
  auto added = runtime->EnqueueGroup(group);
  if (!added.ok()) return Fail(added.status());
  for (int i = 0; i < count; ++i) handles[i] = new kolo_handle_s{(*added)[static_cast<size_t>(i)]};
  return KOLO_SUCCESS;
}

// The fields every wrapper below fills; `dtype` is copied as its bits (see RawCode).
kolo_op_args_t ArgsOf(kolo_collective_t collective, int process_set, const char* name,
                      const void* input, void* output, const kolo_dtype_t& dtype, int ndim,
                      const int64_t* shape) {
  kolo_op_args_t a = KOLO_OP_ARGS_INIT;
  a.collective = collective;
  a.process_set_id = process_set;
  a.name = name;
  a.input = input;
  a.output = output;
  std::memcpy(&a.dtype, &dtype, sizeof dtype);
  a.ndim = ndim;
  a.shape = shape;
  return a;
}

// The grouped functions' arrays as one kolo_op_args_t per tensor, for kolo_submit_group. `op`:
// NULL for all-gather.
kolo_status_t GroupOfArrays(kolo_collective_t collective, int process_set, int count,
                            const char* const* names, const void* const* inputs,
                            void* const* outputs, const kolo_dtype_t* dtypes, const int* ndims,
                            const int64_t* const* shapes, const kolo_reduce_op_t* op,
                            double prescale_factor, double postscale_factor, const int* devices,
                            void* cuda_stream, kolo_handle_t* handles) {
  LastError().clear();
  if (count < 1 || !names || !inputs || !dtypes || !ndims || !shapes || !handles ||
      (collective == KOLO_COLLECTIVE_ALLREDUCE && !outputs)) {
    const std::string what =
        "grouped " + std::string(kolo::OpTypeName(static_cast<kolo::OpType>(collective)));
    return Fail(kolo::InvalidArgumentError(what + ": count < 1 or an array is NULL"));
  }
  std::vector<kolo_op_args_t> args(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    kolo_op_args_t& a = args[static_cast<size_t>(i)];
    a = ArgsOf(collective, process_set, names[i], inputs[i], outputs ? outputs[i] : nullptr,
               dtypes[i], ndims[i], shapes[i]);
    if (op) std::memcpy(&a.reduce_op, op, sizeof a.reduce_op);
    a.prescale_factor = prescale_factor;
    a.postscale_factor = postscale_factor;
    if (devices) a.device = devices[i];
    a.cuda_stream = cuda_stream;
  }
  return kolo_submit_group(args.data(), count, handles);
}

}  // namespace

extern "C" {

kolo_status_t kolo_submit(const kolo_op_args_t* args, kolo_handle_t* handle) {
  LastError().clear();
  kolo_op_args_t a;
  if (kolo_status_t s = ReadArgs(args, "kolo_submit", &a)) return s;
  kolo::OpType op;
  if (kolo_status_t s = CollectiveOf(a, "kolo_submit", &op)) return s;
  kolo::Submission sub;
  const kolo::Status why = Describe(a, op, &sub);
  if (!why.ok()) {
    return Refuse(a.process_set_id, op, kolo::OpLabel(op, a.name ? a.name : ""), {a.name}, why);
  }
  return Submit(std::move(sub), a.ndim, a.shape, handle,
                op == kolo::OpType::kAlltoall ? a.splits : nullptr, a.process_set_id);
}

kolo_status_t kolo_submit_group(const kolo_op_args_t* args, int count, kolo_handle_t* handles) {
  LastError().clear();
  if (count < 1 || !args || !handles) {
    return Fail(kolo::InvalidArgumentError("kolo_submit_group: count < 1 or an array is NULL"));
  }
  for (int i = 0; i < count; ++i) handles[i] = nullptr;
  std::vector<kolo_op_args_t> members(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    if (kolo_status_t s = ReadArgs(&args[i], "kolo_submit_group", &members[i])) return s;
  }
  const kolo_op_args_t& first = members[0];
  kolo::OpType op;
  if (kolo_status_t s = CollectiveOf(first, "kolo_submit_group", &op)) return s;
  std::vector<const char*> names;
  for (const kolo_op_args_t& m : members) names.push_back(m.name);
  const std::string what = "grouped " + std::string(kolo::OpTypeName(op));
  if (op != kolo::OpType::kAllreduce && op != kolo::OpType::kAllgather &&
      op != kolo::OpType::kReducescatter) {
    return Refuse(first.process_set_id, op, what, names,
                  kolo::InvalidArgumentError(
                      "only allreduce, allgather and reducescatter are grouped"));
  }
  for (int i = 1; i < count; ++i) {
    const kolo_op_args_t& m = members[static_cast<size_t>(i)];
    const char* differs =
        RawCode(m.collective) != RawCode(first.collective) ? "collective"
        : m.process_set_id != first.process_set_id        ? "process_set_id"
        : RawCode(m.reduce_op) != RawCode(first.reduce_op) ? "reduce_op"
        : m.prescale_factor != first.prescale_factor ||
                m.postscale_factor != first.postscale_factor
            ? "scale factors"
        : m.cuda_stream != first.cuda_stream ? "cuda_stream"
                                             : nullptr;
    if (differs) {
      return Refuse(first.process_set_id, op, what, names,
                    kolo::InvalidArgumentError("member " + std::to_string(i) + " ('" +
                                               (m.name ? m.name : "") +
                                               "') differs from member 0 in its " + differs));
    }
  }
  std::vector<kolo::Submission> described(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const kolo_op_args_t& m = members[static_cast<size_t>(i)];
    const kolo::Status why = Describe(m, op, &described[static_cast<size_t>(i)]);
    if (!why.ok()) {
      return Refuse(first.process_set_id, op, kolo::OpLabel(op, m.name ? m.name : ""), names,
                    why);
    }
  }
  return SubmitGroup(op, members, std::move(described), names, handles);
}

// ---- the functions of kolo.h that take an operation as parameters: each fills the fields ----

kolo_status_t kolo_allreduce_async_on_stream(int process_set, const char* name,
                                             const void* input, void* output, kolo_dtype_t dtype,
                                             int ndim, const int64_t* shape, kolo_reduce_op_t op,
                                             double prescale_factor, double postscale_factor,
                                             void* cuda_stream, kolo_handle_t* handle) {
  kolo_op_args_t a = ArgsOf(KOLO_COLLECTIVE_ALLREDUCE, process_set, name, input, output, dtype,
                            ndim, shape);
  std::memcpy(&a.reduce_op, &op, sizeof op);
  a.prescale_factor = prescale_factor;
  a.postscale_factor = postscale_factor;
  a.cuda_stream = cuda_stream;
  return kolo_submit(&a, handle);
}

kolo_status_t kolo_allreduce_async_on(int process_set, const char* name, const void* input,
                                      void* output, kolo_dtype_t dtype, int ndim,
                                      const int64_t* shape, kolo_reduce_op_t op,
                                      double prescale_factor, double postscale_factor,
                                      kolo_handle_t* handle) {
  return kolo_allreduce_async_on_stream(process_set, name, input, output, dtype, ndim, shape, op,
                                        prescale_factor, postscale_factor, nullptr, handle);
}

kolo_status_t kolo_allreduce_async(const char* name, const void* input, void* output,
                                   kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                   kolo_reduce_op_t op, double prescale_factor,
                                   double postscale_factor, kolo_handle_t* handle) {
  return kolo_allreduce_async_on(0, name, input, output, dtype, ndim, shape, op, prescale_factor,
                                 postscale_factor, handle);
}

kolo_status_t kolo_allgather_async_on_stream(int process_set, const char* name, const void* input,
                                             kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                             int device, void* cuda_stream,
                                             kolo_handle_t* handle) {
  kolo_op_args_t a = ArgsOf(KOLO_COLLECTIVE_ALLGATHER, process_set, name, input, nullptr, dtype,
                            ndim, shape);
  a.device = device;
  a.cuda_stream = cuda_stream;
  return kolo_submit(&a, handle);
}

kolo_status_t kolo_allgather_async_on(int process_set, const char* name, const void* input,
                                      kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                      kolo_handle_t* handle) {
  return kolo_allgather_async_on_stream(process_set, name, input, dtype, ndim, shape,
                                        KOLO_DEVICE_DETECT, nullptr, handle);
}

kolo_status_t kolo_allgather_async(const char* name, const void* input, kolo_dtype_t dtype,
                                   int ndim, const int64_t* shape, kolo_handle_t* handle) {
  return kolo_allgather_async_on(0, name, input, dtype, ndim, shape, handle);
}

kolo_status_t kolo_broadcast_async_on(int process_set, const char* name, const void* input,
                                      void* output, kolo_dtype_t dtype, int ndim,
                                      const int64_t* shape, int root_rank,
                                      kolo_handle_t* handle) {
  kolo_op_args_t a = ArgsOf(KOLO_COLLECTIVE_BROADCAST, process_set, name, input, output, dtype,
                            ndim, shape);
  a.root_rank = root_rank;
  return kolo_submit(&a, handle);
}

kolo_status_t kolo_broadcast_async(const char* name, const void* input, void* output,
                                   kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                   int root_rank, kolo_handle_t* handle) {
  return kolo_broadcast_async_on(0, name, input, output, dtype, ndim, shape, root_rank, handle);
}

kolo_status_t kolo_reducescatter_async_on_stream(int process_set, const char* name,
                                                 const void* input, kolo_dtype_t dtype, int ndim,
                                                 const int64_t* shape, kolo_reduce_op_t op,
                                                 double prescale_factor, double postscale_factor,
                                                 int device, void* cuda_stream,
                                                 kolo_handle_t* handle) {
  kolo_op_args_t a = ArgsOf(KOLO_COLLECTIVE_REDUCESCATTER, process_set, name, input, nullptr,
                            dtype, ndim, shape);
  std::memcpy(&a.reduce_op, &op, sizeof op);
  a.prescale_factor = prescale_factor;
  a.postscale_factor = postscale_factor;
  a.device = device;
  a.cuda_stream = cuda_stream;
  return kolo_submit(&a, handle);
}

kolo_status_t kolo_reducescatter_async_on(int process_set, const char* name, const void* input,
                                          kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                          kolo_reduce_op_t op, double prescale_factor,
                                          double postscale_factor, kolo_handle_t* handle) {
  return kolo_reducescatter_async_on_stream(process_set, name, input, dtype, ndim, shape, op,
                                            prescale_factor, postscale_factor, KOLO_DEVICE_DETECT,
                                            nullptr, handle);
}

kolo_status_t kolo_reducescatter_async(const char* name, const void* input, kolo_dtype_t dtype,
                                       int ndim, const int64_t* shape, kolo_reduce_op_t op,
                                       double prescale_factor, double postscale_factor,
                                       kolo_handle_t* handle) {
  return kolo_reducescatter_async_on(0, name, input, dtype, ndim, shape, op, prescale_factor,
                                     postscale_factor, handle);
}

kolo_status_t kolo_alltoall_async_on_stream(int process_set, const char* name, const void* input,
                                            kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                            const int64_t* splits, int device, void* cuda_stream,
                                            kolo_handle_t* handle) {
  kolo_op_args_t a = ArgsOf(KOLO_COLLECTIVE_ALLTOALL, process_set, name, input, nullptr, dtype,
                            ndim, shape);
  a.splits = splits;
  a.device = device;
  a.cuda_stream = cuda_stream;
  return kolo_submit(&a, handle);
}

kolo_status_t kolo_alltoall_async_on(int process_set, const char* name, const void* input,
                                     kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                     const int64_t* splits, kolo_handle_t* handle) {
  return kolo_alltoall_async_on_stream(process_set, name, input, dtype, ndim, shape, splits,
                                       KOLO_DEVICE_DETECT, nullptr, handle);
}

kolo_status_t kolo_alltoall_async(const char* name, const void* input, kolo_dtype_t dtype,
                                  int ndim, const int64_t* shape, const int64_t* splits,
                                  kolo_handle_t* handle) {
  return kolo_alltoall_async_on(0, name, input, dtype, ndim, shape, splits, handle);
}

kolo_status_t kolo_grouped_allreduce_async_on(int process_set, int count,
                                              const char* const* names,
                                              const void* const* inputs, void* const* outputs,
                                              const kolo_dtype_t* dtypes, const int* ndims,
                                              const int64_t* const* shapes, kolo_reduce_op_t op,
                                              double prescale_factor, double postscale_factor,
                                              kolo_handle_t* handles) {
  return kolo_grouped_allreduce_async_on_stream(process_set, count, names, inputs, outputs,
                                                dtypes, ndims, shapes, op, prescale_factor,
                                                postscale_factor, nullptr, nullptr, handles);
}

kolo_status_t kolo_grouped_allreduce_async_on_stream(
    int process_set, int count, const char* const* names, const void* const* inputs,
    void* const* outputs, const kolo_dtype_t* dtypes, const int* ndims,
    const int64_t* const* shapes, kolo_reduce_op_t op, double prescale_factor,
    double postscale_factor, const int* devices, void* cuda_stream, kolo_handle_t* handles) {
  return GroupOfArrays(KOLO_COLLECTIVE_ALLREDUCE, process_set, count, names, inputs, outputs,
                       dtypes, ndims, shapes, &op, prescale_factor, postscale_factor, devices,
                       cuda_stream, handles);
}

kolo_status_t kolo_grouped_allgather_async_on(int process_set, int count,
                                              const char* const* names,
                                              const void* const* inputs,
                                              const kolo_dtype_t* dtypes, const int* ndims,
                                              const int64_t* const* shapes,
                                              kolo_handle_t* handles) {
  return kolo_grouped_allgather_async_on_stream(process_set, count, names, inputs, dtypes, ndims,
                                                shapes, nullptr, nullptr, handles);
}

kolo_status_t kolo_grouped_allgather_async_on_stream(
    int process_set, int count, const char* const* names, const void* const* inputs,
    const kolo_dtype_t* dtypes, const int* ndims, const int64_t* const* shapes,
    const int* devices, void* cuda_stream, kolo_handle_t* handles) {
  return GroupOfArrays(KOLO_COLLECTIVE_ALLGATHER, process_set, count, names, inputs, nullptr,
                       dtypes, ndims, shapes, nullptr, 1.0, 1.0, devices, cuda_stream, handles);
}

kolo_status_t kolo_grouped_reducescatter_async_on(int process_set, int count,
                                                  const char* const* names,
                                                  const void* const* inputs,
                                                  const kolo_dtype_t* dtypes, const int* ndims,
                                                  const int64_t* const* shapes,
                                                  kolo_reduce_op_t op, double prescale_factor,
                                                  double postscale_factor,
                                                  kolo_handle_t* handles) {
  return kolo_grouped_reducescatter_async_on_stream(process_set, count, names, inputs, dtypes,
                                                    ndims, shapes, op, prescale_factor,
                                                    postscale_factor, nullptr, nullptr, handles);
}

kolo_status_t kolo_grouped_reducescatter_async_on_stream(
    int process_set, int count, const char* const* names, const void* const* inputs,
    const kolo_dtype_t* dtypes, const int* ndims, const int64_t* const* shapes,
    kolo_reduce_op_t op, double prescale_factor, double postscale_factor, const int* devices,
    void* cuda_stream, kolo_handle_t* handles) {
  return GroupOfArrays(KOLO_COLLECTIVE_REDUCESCATTER, process_set, count, names, inputs, nullptr,
                       dtypes, ndims, shapes, &op, prescale_factor, postscale_factor, devices,
                       cuda_stream, handles);
}

kolo_status_t kolo_refuse_on(int process_set, const char* op, const char* name,
                             const char* reason) {
  LastError().clear();
  const std::string op_name = op ? op : "";
  kolo::OpType type;
  if (op_name == "allreduce") {
    type = kolo::OpType::kAllreduce;
  } else if (op_name == "allgather") {
    type = kolo::OpType::kAllgather;
  } else if (op_name == "broadcast") {
    type = kolo::OpType::kBroadcast;
  } else if (op_name == "reducescatter") {
    type = kolo::OpType::kReducescatter;
  } else if (op_name == "alltoall") {
    type = kolo::OpType::kAlltoall;
  } else {
    return Fail(kolo::InvalidArgumentError("refuse: unknown operation '" + op_name + "'"));
  }
  kolo::Status why;
  auto runtime = kolo::capi::RuntimeOf(process_set, "refuse", &why);
  if (!runtime) return Fail(why);
  kolo::Status s = runtime->Refuse(type, name ? name : "", reason ? reason : "");
  return s.ok() ? KOLO_SUCCESS : Fail(s);
}

}  // extern "C"
