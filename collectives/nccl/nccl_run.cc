#include "collectives/nccl/nccl_run.h"

#include "kolo/config.h"

#if KOLO_WITH_NCCL
#include "collectives/cuda/cuda_call.h"
#include "collectives/cuda/device.h"
#include "collectives/hierarchical_composition.h"
#include "collectives/nccl/nccl_allreduce.h"
#include "collectives/nccl/nccl_comm.h"
#include "collectives/nccl/nccl_communicator.h"
#include "collectives/nccl/nccl_lib.h"
#include "collectives/node_context.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>
#endif

namespace kolo {

#if KOLO_WITH_NCCL

namespace {

// What every NCCL call here needs: the API, the buffers' device, NCCL's dtype and op, the
// stream; with the device made current (restored by the caller's scope).
struct Call {
  const NcclApi* api = nullptr;
  int device = -1;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  cudaStream_t stream = nullptr;
};

StatusOr<Call> Prepare(const Communicator& comm, const AllreduceArgs& args, const char* what) {
  Call c;
  KOLO_ASSIGN_OR_RETURN(c.api, Nccl());
  const PointerKind in = ClassifyPointer(args.send);
  const PointerKind out = ClassifyPointer(args.recv);
  if (args.count > 0 && (out.memory != MemoryKind::kCuda || in.memory != MemoryKind::kCuda ||
                         in.device != out.device)) {
    return InvalidArgumentError(std::string(what) +
                                ": the buffers must both be in the memory of one CUDA device");
  }
  c.device = out.device >= 0 ? out.device : 0;
  if (!NcclDataType(args.dtype, &c.dtype)) {
    return UnimplementedError(std::string(what) + ": NCCL has no " +
                              std::string(DataTypeName(args.dtype)));
  }
  if (!NcclRedOp(args.op, &c.op)) return UnimplementedError(std::string(what) + ": no such NCCL op");
  KOLO_ASSIGN_OR_RETURN(c.stream, KoloStream(comm, c.device));
  return c;
}

}  // namespace

namespace {

// ncclAllReduce enqueued on kolo's stream, its sum times `postscale` (NcclPostscaleFor); *c
// says where (device and stream) for the wait.
Status EnqueueFlat(Communicator& comm, const AllreduceArgs& args, double postscale, Call* c) {
  KOLO_ASSIGN_OR_RETURN(*c, Prepare(comm, args, "ncclAllReduce"));
  const NcclPostscale fold = NcclPostscaleFor(args.dtype, postscale, comm.Size());
  if (postscale != 1.0 && (args.op != ReduceOp::kSum || fold == NcclPostscale::kNone)) {
    return UnimplementedError(
        "ncclAllReduce cannot multiply a " + std::string(ReduceOpName(args.op)) + " of " +
        std::string(DataTypeName(args.dtype)) + " by " + std::to_string(postscale));
  }
  // Made even for an empty call: making the communicator is collective, and every rank must
  // make it at the same call.
  KOLO_ASSIGN_OR_RETURN(NcclLease nc, LeaseNcclComm(comm, c->device));
  if (args.count == 0) return Status::OK();
  CudaDeviceScope scope(c->device);
  ncclRedOp_t op = c->op;
  if (fold == NcclPostscale::kAverage) {
    op = ncclAvg;
  } else if (fold == NcclPostscale::kPreMulSum) {
    // The factor in the dtype's own type, read by the host during the call.
    float f32 = static_cast<float>(postscale);
    double f64 = postscale;
    void* scalar = args.dtype == DataType::kFloat32 ? static_cast<void*>(&f32) : &f64;
    KOLO_RETURN_IF_ERROR(nc.Settle(
        c->api->RedOpCreatePreMulSum(&op, scalar, c->dtype, ncclScalarHostImmediate, nc.get()),
        "ncclRedOpCreatePreMulSum"));
  }
  Status enqueued = nc.Settle(
      c->api->AllReduce(args.send, args.recv, args.count, c->dtype, op, nc.get(), c->stream),
      "ncclAllReduce");
  // An operator may go as soon as the last call given it has returned (NCCL's documentation).
  if (fold == NcclPostscale::kPreMulSum && enqueued.ok()) c->api->RedOpDestroy(op, nc.get());
  return enqueued;
}

}  // namespace

Status EnqueueNcclAllreduce(Communicator& comm, const AllreduceArgs& args, double postscale) {
  Call c;
  return EnqueueFlat(comm, args, postscale, &c);
}

Status RunNcclAllreduce(Communicator& comm, const AllreduceArgs& args) {
  Call c;
  KOLO_RETURN_IF_ERROR(EnqueueFlat(comm, args, 1.0, &c));
  if (args.count == 0) return Status::OK();
  return WaitForNccl(comm, c.device, c.stream, "ncclAllReduce");
}

Status RunNcclHierarchicalAllreduce(Communicator& comm, const AllreduceArgs& args) {
  const NodeContext* node = comm.node();
  if (node == nullptr || !node->local || !node->cross) {
    return UnimplementedError("nccl_hierarchical: no node structure on this communicator");
  }
  const int owners = node->map.min_local_size();
  if (owners != node->map.max_local_size() ||
      args.count % static_cast<size_t>(owners) != 0) {
    return UnimplementedError("nccl_hierarchical: NCCL's reduce-scatter needs equal slices (" +
                              std::to_string(args.count) + " elements, nodes of " +
                              std::to_string(owners) + " to " +
                              std::to_string(node->map.max_local_size()) + " GPUs)");
  }
  KOLO_ASSIGN_OR_RETURN(Call c, Prepare(comm, args, "nccl_hierarchical"));
  NcclCommunicator local(*node->local, c.device);
  NcclCommunicator cross(*node->cross, c.device);
  // The slice's scratch on the device, kept and grown per device (first touch is not free).
  static std::mutex mu;
  static std::map<int, std::pair<void*, size_t>>* scratch = new std::map<int, std::pair<void*, size_t>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& [buf, size] = (*scratch)[c.device];
  Status alloc;
  auto get = [&, dev = c.device](size_t bytes) -> void* {
    if (size < bytes) {
      CudaDeviceScope scope(dev);
      if (buf != nullptr) cudaFree(buf);
      buf = nullptr;
      size = 0;
      const cudaError_t e = cudaMalloc(&buf, bytes);
      if (e != cudaSuccess) {
        alloc = CudaError(e, "cudaMalloc (hierarchical scratch)");
        return nullptr;
      }
      size = bytes;
    }
    return buf;
  };
  Status s = ComposeHierarchicalAllreduce(local, cross, owners, args, get);
  return alloc.ok() ? s : alloc;
}

#else

Status RunNcclAllreduce(Communicator&, const AllreduceArgs&) {
  return UnimplementedError("kolo was built without NCCL (KOLO_WITH_NCCL=OFF)");
}

Status EnqueueNcclAllreduce(Communicator&, const AllreduceArgs&, double) {
  return UnimplementedError("kolo was built without NCCL (KOLO_WITH_NCCL=OFF)");
}

Status RunNcclHierarchicalAllreduce(Communicator&, const AllreduceArgs&) {
  return UnimplementedError("kolo was built without NCCL (KOLO_WITH_NCCL=OFF)");
}

#endif

}  // namespace kolo
