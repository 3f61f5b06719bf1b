// The out-of-band exchange a UCX world is built from (collectives/ucx/ucx_world.h), over
// MPI_COMM_WORLD: the UCX tests' only use of MPI besides start-up and the final exit status.
#ifndef KOLO_TESTS_MPI_MPI_BYTES_ALLGATHER_H_
#define KOLO_TESTS_MPI_MPI_BYTES_ALLGATHER_H_

#include <mpi.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace kolo::testing {

inline Status MpiAllgatherBytes(const std::string& mine, std::vector<std::string>* all) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(size), displs(size);
  if (MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD) !=
      MPI_SUCCESS) {
    return InternalError("MPI_Allgather of UCX address lengths failed");
  }
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[r] = total;
    total += lengths[r];
  }
  std::string joined(total, '\0');
  if (MPI_Allgatherv(mine.data(), length, MPI_BYTE, joined.data(), lengths.data(), displs.data(),
                     MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS) {
    return InternalError("MPI_Allgatherv of UCX addresses failed");
  }
  all->assign(size, std::string());
  for (int r = 0; r < size; ++r) (*all)[r] = joined.substr(displs[r], lengths[r]);
  return Status::OK();
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_MPI_MPI_BYTES_ALLGATHER_H_
