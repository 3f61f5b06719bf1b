/*
 * tcp_defaults_check.c — the Open MPI TCP setting kolo_init makes when it starts MPI
 * (collectives/mpi/tcp_defaults.h): Open MPI's TCP BTL runs without its "put" protocol, unless
 * the user set OMPI_MCA_btl_tcp_flags, whose value then stands; either way the environment
 * after kolo_init is what it was before.
 *
 * Reads what Open MPI itself holds, through the MPI tool interface (the control variable
 * btl_tcp_flags, a bit mask: 0x1 send, 0x2 put), after kolo_init initialised MPI. Usage:
 *   mpirun -np N ./kolo_tcp_defaults_check default   (the variable unset at launch)
 *   mpirun -np N -x OMPI_MCA_btl_tcp_flags=send,put ./kolo_tcp_defaults_check user
 * Exit 0 when every check holds on this rank, 1 with the reason on stderr otherwise, 77 when
 * Open MPI has no TCP BTL to ask. Built and run for Open MPI only (tests/mpi/CMakeLists.txt).
 */
#include <kolo/kolo.h>
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kSend = 0x1, kPut = 0x2 };

/* Reads Open MPI's control variable `name` (one unsigned int) into *value: 0 when read, 1 when
 * this MPI has no such variable, -1 with the reason on stderr when the tool interface fails. */
static int ReadCvar(int rank, const char* name, unsigned* value) {
  int count = 0;
  if (MPI_T_cvar_get_num(&count) != MPI_SUCCESS) {
    fprintf(stderr, "rank %d: MPI_T_cvar_get_num failed\n", rank);
    return -1;
  }
  for (int i = 0; i < count; ++i) {
    char found[256], desc[1024];
    int name_len = sizeof found, desc_len = sizeof desc, verbosity, bind, scope;
    MPI_Datatype type;
    MPI_T_enum enumtype;
    if (MPI_T_cvar_get_info(i, found, &name_len, &verbosity, &type, &enumtype, desc, &desc_len,
                            &bind, &scope) != MPI_SUCCESS ||
        strcmp(found, name) != 0) {
      continue;
    }
    if (type != MPI_UNSIGNED && type != MPI_INT) {
      fprintf(stderr, "rank %d: %s is not an integer variable\n", rank, name);
      return -1;
    }
    MPI_T_cvar_handle handle;
    int elements = 0;
    if (MPI_T_cvar_handle_alloc(i, NULL, &handle, &elements) != MPI_SUCCESS) {
      fprintf(stderr, "rank %d: MPI_T_cvar_handle_alloc(%s) failed\n", rank, name);
      return -1;
    }
    const int rc = elements == 1 ? MPI_T_cvar_read(handle, value) : MPI_ERR_OTHER;
    MPI_T_cvar_handle_free(&handle);
    if (rc != MPI_SUCCESS) {
      fprintf(stderr, "rank %d: reading %s (%d elements) failed\n", rank, name, elements);
      return -1;
    }
    return 0;
  }
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "default") != 0 && strcmp(argv[1], "user") != 0)) {
    fprintf(stderr, "usage: %s default|user\n", argv[0]);
    return 2;
  }
  const int user = strcmp(argv[1], "user") == 0;
  const char* before = getenv("OMPI_MCA_btl_tcp_flags");
  char before_copy[256] = "";
  if (before != NULL) snprintf(before_copy, sizeof before_copy, "%s", before);
  if (user != (before != NULL)) {
    fprintf(stderr, "mode %s but OMPI_MCA_btl_tcp_flags is %s at start\n", argv[1],
            before ? before : "unset");
    return 2;
  }
  kolo_status_t status = kolo_init();
  if (status != KOLO_SUCCESS) {
    fprintf(stderr, "kolo_init failed: %s: %s\n", kolo_status_string(status), kolo_last_error());
    return 1;
  }
  const int rank = kolo_rank();
  int failed = 0;
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
    fprintf(stderr, "rank %d: MPI_T_init_thread failed\n", rank);
    kolo_shutdown();
    return 1;
  }
  unsigned flags = 0;
  const int read = ReadCvar(rank, "btl_tcp_flags", &flags);
  MPI_T_finalize();
  if (read != 0) {
    if (read > 0) fprintf(stderr, "rank %d: Open MPI has no TCP BTL here\n", rank);
    kolo_shutdown();
    return read > 0 ? 77 : 1;
  }
  if (!(flags & kSend)) {
    fprintf(stderr, "rank %d: btl_tcp_flags 0x%x lacks send\n", rank, flags);
    failed = 1;
  }
  if (!user && (flags & kPut)) {
    fprintf(stderr, "rank %d: btl_tcp_flags 0x%x still has put after kolo started MPI\n", rank,
            flags);
    failed = 1;
  }
  if (user && !(flags & kPut)) {
    fprintf(stderr, "rank %d: btl_tcp_flags 0x%x lost the user's put (%s)\n", rank, flags,
            before_copy);
    failed = 1;
  }
  const char* after = getenv("OMPI_MCA_btl_tcp_flags");
  if (!user && after != NULL) {
    fprintf(stderr, "rank %d: OMPI_MCA_btl_tcp_flags=%s left in the environment\n", rank, after);
    failed = 1;
  }
  if (user && (after == NULL || strcmp(after, before_copy) != 0)) {
    fprintf(stderr, "rank %d: OMPI_MCA_btl_tcp_flags %s after kolo_init, %s before\n", rank,
            after ? after : "unset", before_copy);
    failed = 1;
  }
  if (!failed) printf("rank %d: btl_tcp_flags 0x%x (%s)\n", rank, flags, argv[1]);
  kolo_shutdown();
  return failed;
}
