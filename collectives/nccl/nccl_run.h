// The NCCL algorithms' entry points (nccl_allreduce.cc and nccl_hierarchical_allreduce.cc call
// these). Built with NCCL they run on the buffers' device through kolo's stream and wait for the
// result (nccl_comm.h); built without, they fail with kUnimplemented saying so.
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_RUN_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_RUN_H_

#include "collectives/algorithm.h"

namespace kolo {

// ncclAllReduce over all of comm's ranks (NCCL picks its algorithm itself, bound only by
// NCCL_ALGO in the process's environment).
Status RunNcclAllreduce(Communicator& comm, const AllreduceArgs& args);
// The same, enqueued on kolo's stream of the buffers' device without waiting for it
// (StreamOrderedAllreduce): the caller waits, watching the NCCL communicator of (comm, device).
// A `postscale` other than 1 (args.op kSum) multiplies the result in the reduction
// (NcclPostscaleFor, nccl_allreduce.h); kUnimplemented where NCCL cannot.
Status EnqueueNcclAllreduce(Communicator& comm, const AllreduceArgs& args, double postscale = 1.0);

// ncclReduceScatter over comm.node()->local, ncclAllReduce of the slice over ->cross,
// ncclAllGather over ->local; args.count must divide by the local size (Supports checks).
Status RunNcclHierarchicalAllreduce(Communicator& comm, const AllreduceArgs& args);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_RUN_H_
