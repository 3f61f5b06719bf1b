// Element types and reduce operations as kolo-bench names them (nccl-tests' spellings), their
// kolo and MPI counterparts, and the `mpi` path's MPI_Allreduce and MPI_Reduce_scatter_block
// wrapper.
//
// MPI has neither float16/bfloat16 types nor an average, so the `mpi` path does:
//  - half, bfloat16: a user-defined, commutative MPI_Op on MPI_UINT16_T that widens each pair to
//    float, reduces, and rounds back (nearest-even); Open MPI runs it like any other op;
//  - avg: MPI_SUM, then one pass dividing by the number of ranks (in the dtype; integers
//    truncate toward zero, as kolo.h specifies). The pass is inside the timed region.
#ifndef KOLO_BENCH_DTYPES_H_
#define KOLO_BENCH_DTYPES_H_

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/harness.h"
#include "kolo/kolo.h"

namespace kolo::bench {

struct DtypeInfo {
  std::string_view name;  // "float", "half", "bfloat16", ... (nccl-tests' names)
  kolo_dtype_t kolo;
  size_t size;
  bool floating;
  bool is_signed;
};

struct OpInfo {
  std::string_view name;  // "sum", "prod", "min", "max", "avg"
  kolo_reduce_op_t kolo;
};

const std::vector<DtypeInfo>& Dtypes();
const std::vector<OpInfo>& Ops();
// Accepts nccl-tests' names and the usual aliases (float32, fp16, f64, int, char, ...).
// Returns nullptr for an unknown or unsupported name.
const DtypeInfo* ParseDtype(std::string_view name);
const OpInfo* ParseOp(std::string_view name);  // "sum" | "prod" | "min" | "max" | "avg"
// "float, double, half, ..." for --help and error messages.
std::string DtypeNameList();

// IEEE binary16 and bfloat16 <-> float, round to nearest even; NaN stays NaN.
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBfloat16(float value);
float Bfloat16ToFloat(uint16_t bits);

// Element i of a buffer of `dtype`, as a double (exact for every dtype except int64 beyond 2^53,
// which the check patterns never produce), and the converse (rounding to the dtype; integers
// wrap like a C cast).
double LoadElement(const void* data, int64_t i, const DtypeInfo& dtype);
void StoreElement(void* data, int64_t i, const DtypeInfo& dtype, double value);

// MPI_Allreduce for every (dtype, op) pair above, on the bench's communicator. Owns the user
// MPI_Ops for half and bfloat16; construct after MPI_Init, destroy before MPI_Finalize.
class MpiAllreducer {
 public:
  explicit MpiAllreducer(const World& world);
  ~MpiAllreducer();
  MpiAllreducer(const MpiAllreducer&) = delete;
  MpiAllreducer& operator=(const MpiAllreducer&) = delete;

  // output == input selects MPI_IN_PLACE. Fails the job (with the MPI error string) on error.
  void Run(const void* input, void* output, int64_t count, const DtypeInfo& dtype,
           const OpInfo& op) const;
  // MPI_Reduce_scatter_block: `input` holds size * recv_count elements, `output` receives this
  // rank's recv_count; output == input selects MPI_IN_PLACE (the result in the first recv_count).
  void ReduceScatter(const void* input, void* output, int64_t recv_count, const DtypeInfo& dtype,
                     const OpInfo& op) const;

 private:
  MPI_Op OpFor(const DtypeInfo& dtype, const OpInfo& op) const;
  // avg: the division pass after MPI_SUM (integers truncate toward zero).
  void DivideByRanks(void* output, int64_t count, const DtypeInfo& dtype) const;

  const World& world_;
  MPI_Op half_ops_[2][4];  // [half, bfloat16][sum, prod, min, max]
};

}  // namespace kolo::bench

#endif  // KOLO_BENCH_DTYPES_H_
