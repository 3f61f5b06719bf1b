/*
 * allreduce_example.c — kolo's C API end to end, checked against known answers.
 *
 * Every rank builds inputs from its rank alone, so each rank can compute what the result must
 * be without talking to the others:
 *   1. all-reduce a float tensor [kRows, kCols] with Sum (out of place: the input must come back
 *      untouched) and another with Average (in place), both in flight at once so kolo may fuse
 *      them into one collective;
 *   2. all-gather an int32 tensor whose first dimension differs per rank (rank r sends r + 1 rows);
 *   3. all-reduce the number of wrong values with Sum, so every rank agrees on the verdict.
 * Rank 0 prints the summary; every rank exits non-zero when any rank saw a wrong value.
 *
 * Build: see examples/README.md. Run: mpirun -np 2 ./kolo_allreduce_example
 */
#include <kolo/kolo.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define kRows 256
#define kCols 100
#define kCount (kRows * kCols)
#define kGatherCols 3

/* Rank-unique input: no two (rank, index) pairs share a value, so a misplaced chunk shows. */
static float InputValue(int rank, int64_t i) { return (float)(rank * kCount + i); }

static int32_t GatherValue(int rank, int64_t row, int64_t col) {
  return (int32_t)(1000 * rank + 10 * row + col);
}

/* Compares got[0..count) with expected(i) and reports the first bad index and how many are bad. */
static int CountWrongFloats(const char* what, int rank, const float* got, int64_t count,
                            double (*expected)(int64_t i, int size), int size) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double want = expected(i, size);
    if (fabs((double)got[i] - want) > 1e-6 * fabs(want) * size + 1e-6) {
      if (wrong == 0) {
        fprintf(stderr, "rank %d: %s: first wrong value at index %lld: expected %.9g, got %.9g\n",
                rank, what, (long long)i, want, (double)got[i]);
      }
      ++wrong;
    }
  }
  if (wrong > 0) {
    fprintf(stderr, "rank %d: %s: %lld of %lld values wrong\n", rank, what, (long long)wrong,
            (long long)count);
  }
  return wrong > 0;
}

static double SumOverRanks(int64_t i, int size) {
  double sum = 0.0;
  for (int r = 0; r < size; ++r) sum += InputValue(r, i);
  return sum;
}

static double AverageOverRanks(int64_t i, int size) { return SumOverRanks(i, size) / size; }

static double OwnInput(int64_t i, int size) {
  (void)size;
  return InputValue(kolo_rank(), i);
}

/* Waits for `handle`; on failure prints kolo's message. Returns 1 on failure, 0 on success. */
static int WaitFailed(kolo_handle_t handle, const char* what) {
  const kolo_status_t status = kolo_wait(handle);
  if (status != KOLO_SUCCESS) {
    fprintf(stderr, "rank %d: %s failed: %s: %s\n", kolo_rank(), what, kolo_status_string(status),
            kolo_handle_message(handle));
    return 1;
  }
  return 0;
}

/* A refused submission is a bug in this program or in kolo: report it and stop every rank
 * (kolo_shutdown fails the other ranks' pending operations instead of leaving them waiting). */
static int SubmitFailed(kolo_status_t status, const char* what) {
  if (status == KOLO_SUCCESS) return 0;
  fprintf(stderr, "rank %d: submitting %s failed: %s: %s\n", kolo_rank(), what,
          kolo_status_string(status), kolo_last_error());
  kolo_shutdown();
  return 1;
}

static int CheckAllgather(kolo_handle_t handle, int rank, int size) {
  const void* data = NULL;
  int ndim = 0;
  int64_t shape[KOLO_MAX_DIMS];
  const kolo_status_t status = kolo_handle_output(handle, &data, &ndim, shape);
  const int64_t total_rows = (int64_t)size * (size + 1) / 2; /* rank r sent r + 1 rows */
  if (status != KOLO_SUCCESS) {
    fprintf(stderr, "rank %d: allgather output: %s\n", rank, kolo_status_string(status));
    return 1;
  }
  if (ndim != 2 || shape[0] != total_rows || shape[1] != kGatherCols) {
    fprintf(stderr, "rank %d: allgather shape: expected [%lld, %d], got ndim %d [%lld, %lld]\n",
            rank, (long long)total_rows, kGatherCols, ndim, (long long)shape[0],
            ndim > 1 ? (long long)shape[1] : -1LL);
    return 1;
  }
  const int32_t* out = (const int32_t*)data;
  int64_t wrong = 0, row = 0;
  for (int r = 0; r < size; ++r) {
    for (int64_t own_row = 0; own_row <= r; ++own_row, ++row) {
      for (int64_t col = 0; col < kGatherCols; ++col) {
        const int32_t want = GatherValue(r, own_row, col), got = out[row * kGatherCols + col];
        if (got != want && wrong++ == 0) {
          fprintf(stderr, "rank %d: allgather: first wrong value at [%lld, %lld]: expected %d, "
                  "got %d\n", rank, (long long)row, (long long)col, (int)want, (int)got);
        }
      }
    }
  }
  return wrong > 0;
}

int main(void) {
  kolo_status_t status = kolo_init();
  if (status != KOLO_SUCCESS) {
    fprintf(stderr, "kolo_init failed: %s: %s\n", kolo_status_string(status), kolo_last_error());
    return 1;
  }
  const int rank = kolo_rank(), size = kolo_size();

  float* input = malloc(sizeof(float) * kCount);
  float* sum = malloc(sizeof(float) * kCount);
  float* average = malloc(sizeof(float) * kCount);
  int32_t gather_input[kGatherCols * 64];
  if (input == NULL || sum == NULL || average == NULL || size > 64) {
    fprintf(stderr, "rank %d: out of memory, or more than 64 ranks\n", rank);
    kolo_shutdown();
    return 1;
  }
  for (int64_t i = 0; i < kCount; ++i) input[i] = average[i] = InputValue(rank, i);
  const int64_t gather_rows = rank + 1;
  for (int64_t row = 0; row < gather_rows; ++row) {
    for (int64_t col = 0; col < kGatherCols; ++col) {
      gather_input[row * kGatherCols + col] = GatherValue(rank, row, col);
    }
  }

  /* Submit all three, then wait: the background thread negotiates them together. */
  const int64_t shape[2] = {kRows, kCols};
  const int64_t gather_shape[2] = {gather_rows, kGatherCols};
  kolo_handle_t sum_handle, average_handle, gather_handle;
  if (SubmitFailed(kolo_allreduce_async("example/sum", input, sum, KOLO_FLOAT32, 2, shape,
                                        KOLO_OP_SUM, 1.0, 1.0, &sum_handle),
                   "example/sum") ||
      SubmitFailed(kolo_allreduce_async("example/average", average, average, KOLO_FLOAT32, 2,
                                        shape, KOLO_OP_AVERAGE, 1.0, 1.0, &average_handle),
                   "example/average") ||
      SubmitFailed(kolo_allgather_async("example/gather", gather_input, KOLO_INT32, 2,
                                        gather_shape, &gather_handle),
                   "example/gather")) {
    return 1;
  }

  int32_t errors = 0;
  errors += WaitFailed(sum_handle, "allreduce example/sum") ||
            CountWrongFloats("allreduce Sum", rank, sum, kCount, SumOverRanks, size);
  errors += CountWrongFloats("Sum input (must be untouched)", rank, input, kCount, OwnInput, size);
  errors += WaitFailed(average_handle, "allreduce example/average") ||
            CountWrongFloats("allreduce Average", rank, average, kCount, AverageOverRanks, size);
  errors += WaitFailed(gather_handle, "allgather example/gather") ||
            CheckAllgather(gather_handle, rank, size);
  kolo_handle_free(sum_handle);
  kolo_handle_free(average_handle);
  kolo_handle_free(gather_handle);

  /* Every rank learns how many checks failed anywhere, so all exit with the same verdict. */
  int32_t errors_everywhere = errors;
  const int64_t one = 1;
  kolo_handle_t errors_handle;
  if (SubmitFailed(kolo_allreduce_async("example/errors", &errors, &errors_everywhere, KOLO_INT32,
                                        1, &one, KOLO_OP_SUM, 1.0, 1.0, &errors_handle),
                   "example/errors")) {
    return 1;
  }
  if (WaitFailed(errors_handle, "allreduce example/errors")) errors_everywhere = errors + 1;
  kolo_handle_free(errors_handle);

  if (rank == 0) {
    printf("kolo %d.%d.%d, %d ranks: allreduce Sum and Average of [%d, %d] float32, allgather of "
           "[%d, %d] int32 (rank r sends r + 1 rows): %s\n",
           KOLO_VERSION_MAJOR, KOLO_VERSION_MINOR, KOLO_VERSION_PATCH, size, kRows, kCols,
           size * (size + 1) / 2, kGatherCols,
           errors_everywhere == 0 ? "all results correct" : "WRONG RESULTS (see stderr)");
  }
  free(input);
  free(sum);
  free(average);
  status = kolo_shutdown();
  if (status != KOLO_SUCCESS) {
    fprintf(stderr, "rank %d: kolo_shutdown failed: %s\n", rank, kolo_status_string(status));
    return 1;
  }
  return errors_everywhere != 0 || errors != 0;
}
