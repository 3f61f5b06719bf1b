// Runs one (possibly fused) all-reduce: pack with prescale -> algorithm -> unpack with
// postscale, in pieces of the fusion buffer's size so the data stays in cache.
//
// Arithmetic (the same on every path, documented in kolo.h):
//  - float16/bfloat16 are widened to float32 while packing, reduced in float32 and rounded to
//    the 16-bit type once while unpacking (the wire carries float32: twice the bytes, one
//    rounding);
//  - Average = Sum, then postscale/size for floating dtypes; for integers the sum is divided
//    by size truncating toward zero, then postscaled;
//  - a Response with a single tensor that needs no widening skips the buffer: it is reduced
//    straight from input to output (in place when they are the same), in calls of at most one
//    piece each (the communicator cuts them); a floating tensor's scale (Average, postscale) is
//    then applied by the algorithm's last pass where it can (CanRunScaled: the same bits, one
//    pass over the tensor fewer), else by a pass of its own;
//  - a fused Response that needs no widening, given to an algorithm that takes lists
//    (RunsLists: shm), skips the buffer too: one RunList over its tensors where they are, as if
//    they were one buffer (prescale as on the direct path, the scale folded in the same way);
//  - with an algorithm that does not, a fused Response's tensors of direct_bytes or more run
//    alone as on the direct path, and the runs of smaller tensors between them go through the
//    buffer. The planner fuses such tensors only where the runtime found that the selector
//    picks a list-taking algorithm for host float32 at the direct size and at the threshold,
//    so this is the exception: a dtype, op or size between those for which it picks another;
//  - Adasum (RunAdasum) scales like Sum (prescale before, postscale after; no division), and
//    takes its tensors whole: its dot products span a tensor, so it cannot run in pieces.
#ifndef KOLO_FUSION_EXECUTOR_H_
#define KOLO_FUSION_EXECUTOR_H_

#include <vector>

#include "collectives/algorithm.h"
#include "collectives/host/adasum_allreduce.h"
#include "fusion/fusion_buffer.h"

namespace kolo {

struct FusedTensor {
  const void* input = nullptr;
  void* output = nullptr;  // == input for in place
  size_t count = 0;        // elements
};

// Told when each stage of a run starts and finishes, on the running thread (the runtime's
// timeline listens). Tensors [first, last] of the job take part: a piece of the fusion buffer
// packs (kPack), reduces (kReduce) and unpacks (kUnpack) the tensors it covers; the direct
// path has just kReduce.
class ExecutorObserver {
 public:
  enum class Stage { kPack, kReduce, kUnpack };
  virtual ~ExecutorObserver() = default;
  virtual void StageStarted(Stage stage, size_t first, size_t last) = 0;
  virtual void StageFinished(Stage stage, size_t first, size_t last) = 0;
};

struct AllreduceJob {
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // Average, Sum, Min, Max or Product (Adasum: RunAdasum)
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<FusedTensor> tensors;
};

class FusionExecutor {
 public:
  // piece_bytes: the fusion buffer's size. direct_bytes: a fused response's tensor of at least
  // this size is reduced alone, in its own buffers, by an algorithm that does not take lists.
  explicit FusionExecutor(size_t piece_bytes, size_t direct_bytes = size_t{64} << 10)
      : piece_bytes_(piece_bytes), direct_bytes_(direct_bytes) {}
  // Allocates and touches the buffer now, so the first collective does not pay for it.
  Status Prepare() { return buffer_.Reserve(piece_bytes_); }

  // `observer`: nullptr, or told of each stage.
  Status Run(Communicator& comm, AllreduceAlgorithm& algorithm, const AllreduceJob& job,
             ExecutorObserver* observer = nullptr);
  // job.op == kAdasum, host tensors. One tensor that needs no widening runs in its output, as
  // in Run; otherwise all the tensors are packed (prescaled, float16/bfloat16 widened to
  // float32) into one buffer of their total size, which grows and is kept like the fusion
  // buffer, and their counts keep them apart in the dot products.
  Status RunAdasum(Communicator& comm, AdasumAllreduce& adasum, const AllreduceJob& job,
                   ExecutorObserver* observer = nullptr);

 private:
  // Tensor `index` of the job alone, in its own buffers.
  Status RunDirect(Communicator& comm, AllreduceAlgorithm& algorithm, const AllreduceJob& job,
                   size_t index, ExecutorObserver* observer);
  // Tensors [begin, end) of the job through the fusion buffer, a piece at a time.
  Status RunPieces(Communicator& comm, AllreduceAlgorithm& algorithm, const AllreduceJob& job,
                   size_t begin, size_t end, ExecutorObserver* observer);
  // The tensors reduced in their own buffers by an algorithm that takes a list (RunsLists).
  Status RunList(Communicator& comm, AllreduceAlgorithm& algorithm, const AllreduceJob& job,
                 ExecutorObserver* observer);
  // The scale the algorithm applies in its own last pass, or 1 where Finish applies it.
  static double FoldedScale(Communicator& comm, const AllreduceAlgorithm& algorithm,
                            const AllreduceJob& job);
  // Post-processing (Average, postscale) of `count` reduced elements from src into dst.
  Status Finish(void* dst, const void* src, size_t count, const AllreduceJob& job, int size);

  size_t piece_bytes_;
  size_t direct_bytes_;
  FusionBuffer buffer_;
  FusionBuffer whole_;  // Adasum's packed tensors (allocated on its first use)
  std::vector<AllreducePart> parts_;  // RunList's tensors
};

}  // namespace kolo

#endif  // KOLO_FUSION_EXECUTOR_H_
