// Agreeing across ranks at set-up time over any all-gather of bytes: the start-up's
// (runtime/world/bootstrap.h) or an MPI communicator's (collectives/mpi/mpi_node.h).
#ifndef KOLO_COLLECTIVES_AGREE_H_
#define KOLO_COLLECTIVES_AGREE_H_

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace kolo {

// Collective: every rank's `mine`, in rank order, into *all.
using GatherAll = std::function<Status(const std::string& mine, std::vector<std::string>* all)>;

// Fails every rank unless `value` is the same string on all ranks:
// "<what> must be the same on every rank: rank 0 has 'a', rank 2 has 'b'" (the first rank
// that differs from rank 0). Collective. The values cross only when their hashes differ.
Status AgreeOnString(const GatherAll& gather_all, const char* what, const std::string& value);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_AGREE_H_
