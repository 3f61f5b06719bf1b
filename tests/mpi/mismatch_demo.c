/*
 * mismatch_demo.c — what a user sees when ranks disagree about a tensor.
 *
 * Rank 0 submits 'grad/fc1' with shape [3,4], every other rank with shape [4,3]. kolo completes
 * the handle on every rank with KOLO_ERR_INVALID_ARGUMENT and a message naming the tensor, the
 * ranks and both shapes, e.g.
 *   rank 1: allreduce 'grad/fc1': shape mismatch: rank 0 has [3,4], rank 1 has [4,3]
 * Each rank prints the message (prefixed with its rank) on stderr, then all ranks meet once
 * more through kolo (so every rank has printed before any exits), and each exits with 1.
 *
 * Run: mpirun -np 2 ./kolo_mismatch_demo   (tests/mpi/check_mismatch_demo.sh checks it)
 */
#include <kolo/kolo.h>

#include <stdint.h>
#include <stdio.h>

int main(void) {
  kolo_status_t status = kolo_init();
  if (status != KOLO_SUCCESS) {
    fprintf(stderr, "kolo_init failed: %s: %s\n", kolo_status_string(status), kolo_last_error());
    return 2;
  }
  const int rank = kolo_rank();
  const int64_t shape[2] = {rank == 0 ? 3 : 4, rank == 0 ? 4 : 3};
  float input[12], output[12];
  for (int i = 0; i < 12; ++i) input[i] = (float)(rank * 100 + i);

  kolo_handle_t handle = NULL;
  status = kolo_allreduce_async("grad/fc1", input, output, KOLO_FLOAT32, 2, shape, KOLO_OP_SUM,
                                1.0, 1.0, &handle);
  if (status != KOLO_SUCCESS) {
    fprintf(stderr, "rank %d: submission refused: %s: %s\n", rank, kolo_status_string(status),
            kolo_last_error());
    kolo_shutdown();
    return 2;
  }
  status = kolo_wait(handle);
  int exit_code = 0;
  if (status != KOLO_SUCCESS) {
    fprintf(stderr, "rank %d: %s\n", rank, kolo_handle_message(handle));
    fflush(stderr);
    exit_code = 1;
  } else {
    fprintf(stderr, "rank %d: 'grad/fc1' unexpectedly succeeded\n", rank);
  }
  kolo_handle_free(handle);

  /* The next operation still works; it also keeps any rank from exiting before all printed. */
  int32_t one = 1, ranks = 0;
  const int64_t scalar_shape[1] = {1};
  status = kolo_allreduce_async("demo/done", &one, &ranks, KOLO_INT32, 0, scalar_shape,
                                KOLO_OP_SUM, 1.0, 1.0, &handle);
  if (status == KOLO_SUCCESS) {
    status = kolo_wait(handle);
    kolo_handle_free(handle);
  }
  if (status != KOLO_SUCCESS) {
    fprintf(stderr, "rank %d: the operation after the mismatch failed: %s\n", rank,
            kolo_status_string(status));
    exit_code = 2;
  }
  kolo_shutdown();
  return exit_code;
}
