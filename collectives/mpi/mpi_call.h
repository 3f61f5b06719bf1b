// KOLO_MPI_CALL: turns an MPI return code into a Status that names the call, MPI's own error
// string and the rank, so the message reaching a user says what failed and where.
#ifndef KOLO_COLLECTIVES_MPI_MPI_CALL_H_
#define KOLO_COLLECTIVES_MPI_MPI_CALL_H_

#include <mpi.h>

#include <string>

#include "base/status.h"

namespace kolo {

Status MpiError(int code, const char* call);

}  // namespace kolo

#define KOLO_MPI_CALL(call)                                   \
  do {                                                        \
    int kolo_mpi_rc_ = (call);                                \
    if (kolo_mpi_rc_ != MPI_SUCCESS) return ::kolo::MpiError(kolo_mpi_rc_, #call); \
  } while (0)

#endif  // KOLO_COLLECTIVES_MPI_MPI_CALL_H_
