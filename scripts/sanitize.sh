#!/usr/bin/env bash
# Sanitizer and fuzz stages of scripts/test.sh; also usable on its own. Each stage configures its
# own build folder and builds only the targets it runs:
#   address  build-asan/, gcc, -DKOLO_SANITIZE=address (ASan + UBSan, UB aborts): the unit tests
#            (tests/unit, thread worlds included; not the sweeps that add no code path), then
#            the MPI tests at 2 ranks through ctest (the C API under mpirun; LeakSanitizer keeps
#            checking kolo, Open MPI's own leaks at exit are suppressed by
#            scripts/sanitizers/lsan_openmpi.supp)
#   thread   build-tsan/, gcc, -DKOLO_SANITIZE=thread: the unit tests that run threads (thread
#            worlds, runtimes, join; all but death tests, the one-thread half-float sweep and
#            the algorithm sweep's worlds other than 2 ranks: they run the same threads and
#            communicator, and took 44 s at 3 ranks alone; their step tables run under ASan)
#   fuzz     build-fuzz/, clang, -DKOLO_FUZZ=ON: checks that the seed corpus fuzz/corpus/wire/
#            still decodes, then runs kolo-wire-fuzz (the wire-format decoders) for
#            KOLO_FUZZ_SECONDS; new inputs go to build-fuzz/fuzz-corpus/, crashes to
#            build-fuzz/fuzz-artifacts/
# Sanitizer builds are -O1 -g1 without NDEBUG, so assert()s are checked too. Any sanitizer report
# fails its stage, and the script exits non-zero at the first failed stage.
#
# Usage: scripts/sanitize.sh [address|thread|fuzz]...   (no argument: all three, in that order)
# Environment: as scripts/env.sh (KOLO_BUILD_JOBS, KOLO_BUILD_LOCK); KOLO_FUZZ_SECONDS (default
#              30); KOLO_SKIP_APT=1 skips installing clang for the fuzz stage.
set -Eeuo pipefail

# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"

readonly SAN_DIR="${KOLO_ROOT}/scripts/sanitizers"
# -O1: sanitizer builds compile faster and report more precisely; no -DNDEBUG: asserts on.
# -g1: line tables only, all a sanitizer's stack trace needs (file:line in every frame); it
# compiles ~13% faster than -g, and these builds are most of the stages' time.
# Unity builds (CMake compiles each target's sources in batches of 8, one translation unit per
# batch): each header is parsed once per batch, not once per file. The TSan build of the unit
# tests took 174 s from scratch against 282 s file by file. These folders are built from
# scratch for each run, where a batch's recompiling of 8 files for one change does not matter;
# build/ stays file by file for day-to-day work, and it is what checks each file's own includes.
# Names local to a file (anonymous namespaces, statics) must therefore differ between the files
# of a target.
readonly SAN_BUILD_FLAGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD=ON
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1")
# libFuzzer comes with clang's runtime; Debian 12's clang is 14.
readonly FUZZ_PACKAGES=(clang-14 libclang-rt-14-dev)
readonly FUZZ_CC=clang-14 FUZZ_CXX=clang++-14

# configure DIR [cmake arguments]: (re)configure a build folder, quietly unless it fails.
configure() {
  local dir=$1 preflags log
  shift
  preflags="$(IFS=';'; echo "${KOLO_MPIRUN_FLAGS[*]}")"
  log="$(mktemp)"
  kolo_log "configure: ${dir} $*"
  # CUDA off: nvcc does not take the sanitizer flags and the device path cannot run under them.
  if ! cmake -S "${KOLO_ROOT}" -B "${dir}" "${SAN_BUILD_FLAGS[@]}" \
      -DMPIEXEC_PREFLAGS="${preflags}" -DKOLO_BUILD_BENCH=OFF \
      -DKOLO_WITH_CUDA=OFF -DKOLO_WITH_NCCL=OFF "$@" >"${log}" 2>&1; then
    cat "${log}" >&2
    rm -f "${log}"
    return 1
  fi
  rm -f "${log}"
}

# LeakSanitizer's check at exit stops every thread with a tracer that reads each thread's TLS.
# Up to GCC 13 (and LLVM 16) the sanitizer runtime's __tls_get_addr interceptor takes a dynamic
# TLS block whose start is 16 bytes past a page boundary for one with a pre-2.25 glibc header
# and reads the two words before it as that block's bounds; a block malloc happens to put there
# makes the tracer fault ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal
# error") after every test passed, on some runs only (LLVM review D147459 fixed the runtime).
# Debian 12's gcc 12 has the bug, so the interceptor is off: kolo's libraries use static TLS,
# which LeakSanitizer scans without it.
readonly ASAN_RUNTIME_OPTIONS="intercept_tls_get_addr=0"

# run_logged LOG CMD...: runs a gtest program under a sanitizer with everything it prints in LOG,
# then prints the part worth reading (digest.awk: the summary, each failure, each sanitizer report
# with the test it came in). CI keeps a log's last lines only, and these runs print thousands.
run_logged() {
  local log=$1 rc=0
  shift
  kolo_log "+ $(printf '%q ' "$@")> ${log}"
  "$@" >"${log}" 2>&1 || rc=$?
  awk -f "${SAN_DIR}/digest.awk" "${log}" >&2 || true
  if ((rc != 0)); then
    # A crash or an abort outside any report (an assert, a signal) shows only at the end.
    kolo_log "exit ${rc}; the last lines of ${log}, which has the whole output:"
    tail -n 30 "${log}" >&2
  fi
  return "${rc}"
}

stage_address() {
  local dir="${KOLO_ROOT}/build-asan"
  configure "${dir}" -DKOLO_SANITIZE=address
  # Every program the mpi.*.np2 tests below start (tests/mpi/CMakeLists.txt); ctest fails a
  # test whose program was not built ("not found").
  local targets=(kolo_unit_tests kolo_mpi_tests kolo_algo_mpi_tests kolo_topology_mpi_tests
    kolo_mismatch_demo)
  # Where UCX was found: the UCX communicator's suite, and the C example that the transport
  # mismatch test starts with a different KOLO_TRANSPORT on its last rank.
  if [[ -d "${dir}/tests/mpi/CMakeFiles/kolo_ucx_mpi_tests.dir" ]]; then
    targets+=(kolo_ucx_mpi_tests kolo_allreduce_example)
  fi
  # Where MPI is Open MPI: the check of the TCP setting kolo_init makes for MPI_Init.
  if [[ -d "${dir}/tests/mpi/CMakeFiles/kolo_tcp_defaults_check.dir" ]]; then
    targets+=(kolo_tcp_defaults_check)
  fi
  kolo_build "${dir}" --target "${targets[@]}"
  # All but what the thread stage also leaves out, for the same reasons: the one-thread
  # half-float sweep and the algorithm sweep at 5-7 ranks (no code path that 2-4 do not take).
  # The algorithm sweep takes one dtype per element size with Sum (KOLO_ALGO_TEST_CASES=bytes,
  # tests/unit/allreduce_algorithms_test.cc); the kernels' whole dtype x op matrix runs in
  # ReduceIntoTest and ThreadWorld/AllreduceEveryDtypeOp.
  # RunScaledTest, the same layouts, likewise at 1-4 ranks.
  local sweep='All/AllreduceAlgorithmTest.*' scaled='All/RunScaledTest.*'
  kolo_log "address: unit tests"
  run_logged "${dir}/unit-tests.log" env ASAN_OPTIONS="${ASAN_RUNTIME_OPTIONS}" \
    UBSAN_OPTIONS=print_stacktrace=1 KOLO_ALGO_TEST_CASES=bytes "${dir}/tests/kolo_unit_tests" \
    --gtest_filter="-*HalfConversion*:${sweep}np5*:${sweep}np6*:${sweep}np7*:${scaled}np5*:\
${scaled}np6*:${scaled}np7*"
  # Open MPI has no frame pointers: the slow unwinder gives full allocation stacks, so the
  # suppressions see Open MPI's frames in Open MPI's leaks and nothing else is suppressed.
  # Every mpi.*.np2 test but the one with 2 GiB buffers per rank, and the algorithm suite over
  # UCX (the algorithms run over MPI here, and the UCX communicator's own suite, mpi.ucx.np2).
  # The algorithm suite takes one dtype per element size with Sum (KOLO_ALGO_TEST_CASES=bytes,
  # tests/mpi/algorithms_main.cc): the kernels' dtype x op matrix ran in the unit tests above
  # (ReduceIntoTest, ThreadWorld/AllreduceEveryDtypeOp).
  kolo_log "address: MPI suites at 2 ranks"
  kolo_run env ASAN_OPTIONS="fast_unwind_on_malloc=0:${ASAN_RUNTIME_OPTIONS}" \
    KOLO_ALGO_TEST_CASES=bytes \
    UBSAN_OPTIONS=print_stacktrace=1 \
    LSAN_OPTIONS="suppressions=${SAN_DIR}/lsan_openmpi.supp" \
    ctest --test-dir "${dir}" --output-on-failure --no-tests=error --timeout 300 \
    -R '^mpi\.[a-z_]+\.np2$' -E '^mpi\.(large_counts|algorithms_ucx)\.'
}

stage_thread() {
  local dir="${KOLO_ROOT}/build-tsan"
  configure "${dir}" -DKOLO_SANITIZE=thread
  kolo_build "${dir}" --target kolo_unit_tests
  # Death tests fork a threaded process, which TSan does not support; HalfConversion sweeps all
  # 65536 half floats on one thread (20 s under TSan, nothing to find). The algorithm sweep runs
  # at 2 ranks here, one dtype per element size with Sum (KOLO_ALGO_TEST_CASES=bytes): one rank
  # exchanges nothing between threads; more threads run the same exchanges with more steps, and
  # the 4-rank worlds alone took 100 s of this stage's 260 s of tests (the node groupings of 4
  # ranks stay covered by Groupings/HierarchicalPathsTest). The ASan stage runs it at 1-4 ranks,
  # ctest at 1-7 with every dtype and op.
  # RunScaledTest, the same layouts, likewise at 2 ranks only.
  local sweep='All/AllreduceAlgorithmTest.*' scaled='All/RunScaledTest.*'
  # libucm (UCX's memory hooks, loaded with the UCX communicator) patches mmap in every process
  # that links it, which collides with TSan's own mmap interceptor: the first thread world then
  # crashes (SIGSEGV). The unit tests use no UCX, so its mmap hook is off here.
  kolo_log "thread: unit tests that run threads"
  run_logged "${dir}/unit-tests.log" env TSAN_OPTIONS=second_deadlock_stack=1 \
    UCX_MEM_MMAP_HOOK_MODE=none KOLO_ALGO_TEST_CASES=bytes "${dir}/tests/kolo_unit_tests" \
    --gtest_filter="-*DeathTest.*:*HalfConversion*:${sweep}np1:${sweep}np3*:${sweep}np4*:${sweep}np5*:\
${sweep}np6*:${sweep}np7*:${scaled}np1:${scaled}np3*:${scaled}np4*:${scaled}np5*:${scaled}np6*:\
${scaled}np7*"
}

stage_fuzz() {
  local dir="${KOLO_ROOT}/build-fuzz" seconds="${KOLO_FUZZ_SECONDS:-30}" log
  kolo_install_packages "${FUZZ_PACKAGES[@]}"
  configure "${dir}" -DCMAKE_C_COMPILER="${FUZZ_CC}" -DCMAKE_CXX_COMPILER="${FUZZ_CXX}" \
    -DKOLO_FUZZ=ON -DKOLO_BUILD_TESTS=OFF -DKOLO_WITH_UCX=OFF
  kolo_build "${dir}" --target kolo-wire-fuzz kolo-wire-corpus
  kolo_run "${dir}/fuzz/kolo-wire-corpus" --check "${KOLO_ROOT}/fuzz/corpus/wire"
  mkdir -p "${dir}/fuzz-corpus/wire" "${dir}/fuzz-artifacts"
  log="${dir}/fuzz-wire.log"
  kolo_log "fuzz: kolo-wire-fuzz for ${seconds} s (log: ${log})"
  # The first corpus folder receives new inputs, so the committed seeds stay as they are.
  if ! kolo_run "${dir}/fuzz/kolo-wire-fuzz" -max_total_time="${seconds}" -max_len=4096 \
      -timeout=10 -print_final_stats=1 -dict="${KOLO_ROOT}/fuzz/wire.dict" \
      -artifact_prefix="${dir}/fuzz-artifacts/" \
      "${dir}/fuzz-corpus/wire" "${KOLO_ROOT}/fuzz/corpus/wire" >"${log}" 2>&1; then
    tail -n 60 "${log}" >&2
    kolo_log "fuzz: kolo-wire-fuzz FAILED; the input is in ${dir}/fuzz-artifacts/, replay it with"
    kolo_log "  ${dir}/fuzz/kolo-wire-fuzz ${dir}/fuzz-artifacts/<file>"
    return 1
  fi
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "${log}" >&2 || true
}

stages=("$@")
if ((${#stages[@]} == 0)); then
  stages=(address thread fuzz)
fi
for stage in "${stages[@]}"; do
  case "${stage}" in
    address | thread | fuzz) ;;
    *)
      kolo_log "unknown stage '${stage}': expected address, thread or fuzz"
      exit 2
      ;;
  esac
done
for stage in "${stages[@]}"; do
  start=${SECONDS}
  kolo_log "=== sanitize ${stage}: start"
  trap 'kolo_log "=== sanitize ${stage}: FAILED after $((SECONDS - start)) s"' ERR
  "stage_${stage}"
  trap - ERR
  kolo_log "=== sanitize ${stage}: passed in $((SECONDS - start)) s"
done
