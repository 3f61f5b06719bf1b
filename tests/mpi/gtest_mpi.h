// The start and the end of a GoogleTest program under mpirun: MPI with threads, gtest's report
// from rank 0 only (every rank runs every test), and one exit status that every rank agrees
// on, so any rank's failure fails the job.
#ifndef KOLO_TESTS_MPI_GTEST_MPI_H_
#define KOLO_TESTS_MPI_GTEST_MPI_H_

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace kolo::testing {

// MPI_Init_thread(MPI_THREAD_MULTIPLE) and gtest's flags; *rank and *size in MPI_COMM_WORLD.
inline void StartGtestUnderMpi(int* argc, char*** argv, int* rank, int* size) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "MPI_Init_thread failed\n");
    std::exit(1);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  ::testing::InitGoogleTest(argc, *argv);
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (*rank != 0) delete listeners.Release(listeners.default_result_printer());
}

// The exit status for main: 1 on every rank when any rank's `failed` is non-zero.
inline int EndGtestUnderMpi(int failed) {
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed ? 1 : 0;
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_MPI_GTEST_MPI_H_
