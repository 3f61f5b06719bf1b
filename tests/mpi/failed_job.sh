# Sourced by the tests/mpi scripts that expect a job to fail promptly.
# check_failed_job RC LIMIT_S WHY: prints why and returns 1 when mpirun's status RC is 0 (the
# job should have failed: WHY says why), or is timeout's (124, 137: it ran past LIMIT_S).
check_failed_job() {
  local rc=$1 limit=$2 why=$3
  if [[ ${rc} -eq 0 ]]; then
    echo "FAIL: mpirun exited 0; ${why}" >&2
    return 1
  elif [[ ${rc} -eq 124 || ${rc} -eq 137 ]]; then
    echo "FAIL: the job did not end within ${limit} s (rc ${rc})" >&2
    return 1
  fi
  return 0
}
