/* Tier-3 fault scenarios, one per mode, driven by run_fault.py under mpirun or under
 * kolo.local_launch (started as torchrun starts processes: RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT and no MPI; MPI is then never initialised here). The last
 * rank misbehaves; every other rank reports what kolo told it as
 *   FAULT-RESULT rank <r>: <STATUS>: <message>
 * and exits 0 when that is the expected failure, 1 when an operation succeeded that should not
 * have. The driver checks the texts, the exit codes and the time each took.
 *
 *   stall           the last rank skips one allreduce that it made the step before (a cached
 *                   tensor); the others' fails after KOLO_STALL_SHUTDOWN_TIME_SECONDS
 *   early-shutdown  the last rank shuts kolo down while the others keep submitting
 *   kill            the last rank SIGKILLs itself 2 ms into a 16 MiB allreduce
 *   exit            the last rank _exit(0)s mid-job (no kolo_shutdown, no MPI_Finalize)
 *   forever         every rank allreduces until killed (for the Ctrl-C test); prints READY <pid>
 *   cut             every rank prints READY <pid> and allreduces 1 MiB in a loop while the
 *                   driver cuts a node's network link (tests/multinode): each rank reports
 *                   the failure, prints FAULT-DONE and stays until the driver kills the job
 *                   (neither kolo_shutdown nor MPI_Finalize can finish without the link)
 *   missing-at-start  the last rank never calls kolo_init (it sleeps); kolo_init starts MPI on
 *                   the others and fails after KOLO_START_TIMEOUT naming it. Every rank then
 *                   waits for the driver to kill the job once it has every survivor's result
 *                   (a survivor that exited would make mpirun kill the others, perhaps before
 *                   they printed theirs)
 *   missing-after-mpi  the same, with MPI started by the program on every rank first
 *   wrong-port      (started without MPI) the same, but the last rank does call kolo_init, with
 *                   MASTER_PORT and KOLO_MASTER_PORT set to KOLO_FAULT_WRONG_PORT, where nothing
 *                   listens: it fails naming that address, the others naming it as the rank
 *                   that never came
 *   freeze          the last rank stops itself (SIGSTOP) 2 ms into a 16 MiB allreduce and prints
 *                   FROZEN <pid> first; the others' allreduce warns after
 *                   KOLO_STALL_CHECK_TIME_SECONDS and fails after KOLO_STALL_SHUTDOWN_TIME_SECONDS
 *                   (kolo stops: their next operation fails at once with that reason); the
 *                   driver then kills the stopped rank
 */
#include <kolo/kolo.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank, g_size;

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static struct timespec now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t;
}

static double seconds_since(struct timespec t0) {
  const struct timespec t = now();
  return (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9;
}

/* Allreduce of `count` floats named `name`; returns the status and prints a failure. */
static kolo_status_t allreduce(const char* name, float* buf, int64_t count) {
  kolo_handle_t h = NULL;
  kolo_status_t s = kolo_allreduce_async(name, buf, buf, KOLO_FLOAT32, 1, &count, KOLO_OP_SUM,
                                         1.0, 1.0, &h);
  const char* message = kolo_last_error();
  if (s == KOLO_SUCCESS) {
    s = kolo_wait(h);
    message = kolo_handle_message(h);
  }
  if (s != KOLO_SUCCESS) {
    printf("FAULT-RESULT rank %d: %s: %s\n", g_rank, kolo_status_string(s), message);
    fflush(stdout);
  }
  if (h) kolo_handle_free(h);
  return s;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr,
            "usage: kolo_fault stall|early-shutdown|kill|exit|forever|cut|freeze|missing-at-start|"
            "missing-after-mpi|wrong-port\n");
    return 2;
  }
  const char* mode = argv[1];
  int provided = 0;
  /* Started as torchrun starts processes, not by an MPI launcher: kolo starts without MPI, and
   * so does this program. */
  const int env_start = getenv("RANK") && getenv("MASTER_ADDR") && !getenv("OMPI_COMM_WORLD_SIZE");
  const int wrong_port = strcmp(mode, "wrong-port") == 0;
  const int missing = strncmp(mode, "missing-", 8) == 0 || wrong_port;
  if (!env_start && (!missing || strcmp(mode, "missing-after-mpi") == 0)) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }
  if (missing) {
    /* The launcher's rank: MPI may not have started, and kolo_rank() needs kolo_init. */
    const char* env_rank = getenv(env_start ? "RANK" : "OMPI_COMM_WORLD_RANK");
    const char* env_size = getenv(env_start ? "WORLD_SIZE" : "OMPI_COMM_WORLD_SIZE");
    if (!env_rank || !env_size || (wrong_port && !env_start)) {
      fprintf(stderr, "kolo_fault %s needs %s\n", mode,
              wrong_port ? "a start without MPI (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)"
                         : "Open MPI's mpirun or a start without MPI");
      return 2;
    }
    const int rank = atoi(env_rank), size = atoi(env_size);
    if (rank == size - 1) {
      if (!wrong_port) {
        printf("SKIPPING kolo_init on rank %d\n", rank);
        fflush(stdout);
        sleep(60); /* killed by the driver */
        return 0;
      }
      const char* port = getenv("KOLO_FAULT_WRONG_PORT");
      if (!port) {
        fprintf(stderr, "kolo_fault wrong-port needs KOLO_FAULT_WRONG_PORT\n");
        return 2;
      }
      /* Both: kolo's rendezvous is on KOLO_MASTER_PORT where the launcher set one (as
       * kolo.local_launch does), else on MASTER_PORT. */
      setenv("MASTER_PORT", port, 1);
      setenv("KOLO_MASTER_PORT", port, 1);
      printf("WRONG-PORT rank %d: MASTER_PORT=%s\n", rank, port);
      fflush(stdout);
    }
    const struct timespec t0 = now();
    const kolo_status_t s = kolo_init();
    /* One write, so mpirun cannot interleave another rank's output inside it. */
    printf("FAULT-RESULT rank %d: %s: %s\nFAULT-TOOK rank %d: %.2f\n", rank,
           kolo_status_string(s), s == KOLO_SUCCESS ? "" : kolo_last_error(), rank,
           seconds_since(t0));
    fflush(stdout);
    sleep(60); /* killed by the driver */
    return s == KOLO_ERR_DEADLINE_EXCEEDED ? 0 : 1;
  }
  if (kolo_init() != KOLO_SUCCESS) {
    fprintf(stderr, "kolo_init: %s\n", kolo_last_error());
    return 2;
  }
  g_rank = kolo_rank();
  g_size = kolo_size();
  const int last = g_size - 1;
  const int64_t small = 4, large = 4 << 20; /* 16 MiB of float */
  float* buf = calloc((size_t)large, sizeof(float));
  int rc = 0;

  if (strcmp(mode, "stall") == 0) {
    allreduce("step.x", buf, small); /* negotiated once: cached from now on */
    if (g_rank != last) {
      rc = allreduce("step.x", buf, small) == KOLO_ERR_DEADLINE_EXCEEDED ? 0 : 1;
    }
    /* MPI's barrier, not kolo's: a kolo barrier that the last rank reached seconds before the
     * others would itself be a stalled operation. */
    if (!env_start) MPI_Barrier(MPI_COMM_WORLD);
  } else if (strcmp(mode, "early-shutdown") == 0) {
    allreduce("first", buf, small);
    if (g_rank == last) {
      kolo_shutdown();
    } else {
      rc = 1;
      for (int i = 0; i < 100000; ++i) {
        kolo_status_t s = allreduce("loop", buf, small);
        if (s != KOLO_SUCCESS) {
          rc = s == KOLO_ERR_FAILED_PRECONDITION ? 0 : 1;
          break;
        }
      }
    }
  } else if (strcmp(mode, "kill") == 0 || strcmp(mode, "exit") == 0) {
    const int kill = strcmp(mode, "kill") == 0;
    for (int i = 0;; ++i) {
      if (g_rank == last && i == 3) {
        fflush(stdout);
        if (kill) {
          /* Die while the data moves: the submission is negotiated within microseconds, and a
           * 16 MiB allreduce takes milliseconds here. */
          kolo_handle_t h = NULL;
          kolo_allreduce_async("big", buf, buf, KOLO_FLOAT32, 1, &large, KOLO_OP_SUM, 1.0, 1.0,
                               &h);
          sleep_ms(2);
          raise(SIGKILL);
        }
        _exit(0);
      }
      /* A survivor that was told exits non-zero, as a training script would. */
      if (allreduce("big", buf, large) != KOLO_SUCCESS) {
        rc = 3;
        break;
      }
    }
  } else if (strcmp(mode, "freeze") == 0) {
    for (int i = 0;; ++i) {
      if (g_rank == last && i == 3) {
        kolo_handle_t h = NULL;
        kolo_allreduce_async("big", buf, buf, KOLO_FLOAT32, 1, &large, KOLO_OP_SUM, 1.0, 1.0, &h);
        sleep_ms(2);
        printf("FROZEN %d\n", (int)getpid());
        fflush(stdout);
        raise(SIGSTOP);
        _exit(0); /* not reached: the driver kills this rank */
      }
      if (allreduce("big", buf, large) != KOLO_SUCCESS) {
        /* kolo stopped: a later operation fails at once, with the same reason. */
        rc = allreduce("after", buf, small) == KOLO_ERR_FAILED_PRECONDITION ? 0 : 4;
        break;
      }
    }
    /* Stay until the driver has every survivor's outcome and kills the job: a survivor that
     * exits is a lost rank to the others still waiting, and MPI_Finalize would wait for the
     * stopped one. */
    printf("FAULT-DONE rank %d: %d\n", g_rank, rc);
    fflush(stdout);
    for (;;) pause();
  } else if (strcmp(mode, "cut") == 0) {
    printf("READY %d\n", (int)getpid());
    fflush(stdout);
    rc = 1;
    for (int i = 0; i < 1000000; ++i) {
      if (allreduce("cut", buf, 1 << 18) != KOLO_SUCCESS) {
        rc = 0;
        break;
      }
    }
    printf("FAULT-DONE rank %d: %d\n", g_rank, rc);
    fflush(stdout);
    for (;;) pause();
  } else if (strcmp(mode, "forever") == 0) {
    printf("READY %d\n", (int)getpid());
    fflush(stdout);
    for (;;) {
      if (allreduce("forever", buf, small) != KOLO_SUCCESS) break;
      sleep_ms(1);
    }
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    rc = 2;
  }
  free(buf);
  kolo_shutdown();
  if (!env_start) MPI_Finalize();
  return rc;
}
