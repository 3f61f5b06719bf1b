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
 * this MPI is not Open MPI or has no TCP BTL to ask.
 */
#include <kolo/kolo.h>
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kSend = 0x1, kPut = 0x2 };

/* The value of Open MPI's control variable `name` as an unsigned int; 0 when found. */
static int ReadCvar(const char* name, unsigned* value) {
  int count = 0;
  MPI_T_cvar_get_num(&count);
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
    if (type != MPI_UNSIGNED && type != MPI_INT) return -1;
    MPI_T_cvar_handle handle;
    int elements = 0;
    if (MPI_T_cvar_handle_alloc(i, NULL, &handle, &elements) != MPI_SUCCESS) return -1;
    const int rc = MPI_T_cvar_read(handle, value);
    MPI_T_cvar_handle_free(&handle);
    return rc == MPI_SUCCESS ? 0 : -1;
  }
  return -1;
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
#ifndef OMPI_MAJOR_VERSION
  fprintf(stderr, "rank %d: not Open MPI: nothing to check\n", rank);
  kolo_shutdown();
  return 77;
#endif
  int provided = 0;
  MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
  unsigned flags = 0;
  if (ReadCvar("btl_tcp_flags", &flags) != 0) {
    fprintf(stderr, "rank %d: Open MPI has no btl_tcp_flags control variable here\n", rank);
    MPI_T_finalize();
    kolo_shutdown();
    return 77;
  }
  MPI_T_finalize();
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
