# Required: MPI, hwloc, FlatBuffers, spdlog, nlohmann-json, CLI11, DLPack, threads. Optional
# (AUTO|ON|OFF): CUDA+NCCL, UCX, PMIx (bounds kolo_init's start: runtime/world/start_fence.h).
#
# A required dependency that is missing stops the configuration with one line naming the Debian
# package that provides it: pip shows CMake's output, and "Could NOT find X" sends a user who runs
# `pip install` hunting for the package name. (A message that starts with a space is left as one
# line; CMake wraps the others at 80 columns.)
function(kolo_missing what packages)
  message(FATAL_ERROR " kolo needs ${what}: install it with `apt-get install ${packages}`")
endfunction()

find_package(Threads REQUIRED)
find_package(PkgConfig QUIET)
if(NOT PkgConfig_FOUND)
  kolo_missing("pkg-config" "pkg-config")
endif()
find_package(MPI QUIET COMPONENTS C CXX)
if(NOT MPI_FOUND)
  kolo_missing("MPI's development files (mpi.h and mpicc)" "libopenmpi-dev openmpi-bin")
endif()
# mpi.h alone, for the files that name MPI types (MPI_Comm in kolo_init_comm's path) but call no
# MPI: they are in libkolo.so, which does not link libmpi (runtime/world/mpi_plugin.h).
add_library(kolo_mpi_headers INTERFACE)
target_include_directories(kolo_mpi_headers INTERFACE
  $<TARGET_PROPERTY:MPI::MPI_C,INTERFACE_INCLUDE_DIRECTORIES>)
# Without the MPI C++ bindings' inline functions, which call MPI.
target_compile_definitions(kolo_mpi_headers INTERFACE OMPI_SKIP_MPICXX MPICH_SKIP_MPICXX)
pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc>=2.0)
if(NOT HWLOC_FOUND)
  kolo_missing("hwloc 2 (pkg-config hwloc)" "libhwloc-dev")
endif()
# Debian ships FlatBuffersConfig.cmake; only flatc and the header-only builder/verifier are used.
find_package(flatbuffers NAMES FlatBuffers flatbuffers QUIET)
if(NOT flatbuffers_FOUND OR NOT TARGET flatbuffers::flatc)
  kolo_missing("FlatBuffers and its compiler flatc" "libflatbuffers-dev flatbuffers-compiler")
endif()
find_package(spdlog QUIET)
if(NOT spdlog_FOUND)
  kolo_missing("spdlog" "libspdlog-dev")
endif()
find_package(nlohmann_json 3 QUIET)  # tuning files (collectives/select/cost_model.cc)
if(NOT nlohmann_json_FOUND)
  kolo_missing("nlohmann-json 3" "nlohmann-json3-dev")
endif()
find_package(CLI11 CONFIG QUIET)  # the command lines of kolo-bench and kolo-topo
if(NOT CLI11_FOUND)
  kolo_missing("CLI11" "libcli11-dev")
endif()
find_path(DLPACK_INCLUDE_DIR dlpack/dlpack.h)  # the Python extension's tensor exchange
if(NOT DLPACK_INCLUDE_DIR)
  kolo_missing("DLPack's header dlpack/dlpack.h" "libdlpack-dev")
endif()

# kolo_optional(<VAR> <found>): resolve an AUTO|ON|OFF option against what was found.
function(kolo_resolve_option var found what)
  if(${var} STREQUAL "OFF")
    set(${var} OFF PARENT_SCOPE)
  elseif(found)
    set(${var} ON PARENT_SCOPE)
  elseif(${var} STREQUAL "ON")
    message(FATAL_ERROR "${var}=ON but ${what} was not found")
  else()
    set(${var} OFF PARENT_SCOPE)
  endif()
endfunction()

set(_kolo_cuda_found FALSE)
if(NOT KOLO_WITH_CUDA STREQUAL "OFF")
  if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  set(_kolo_cuda_found ${CUDAToolkit_FOUND})
endif()
kolo_resolve_option(KOLO_WITH_CUDA ${_kolo_cuda_found} "the CUDA toolkit")

set(_kolo_nccl_found FALSE)
if(KOLO_WITH_CUDA AND NOT KOLO_WITH_NCCL STREQUAL "OFF")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(_kolo_nccl_found TRUE)
  endif()
endif()
kolo_resolve_option(KOLO_WITH_NCCL ${_kolo_nccl_found} "NCCL (nccl.h and libnccl)")

# The device code (fusion/cuda/*.cu) is compiled whenever the toolkit is there, so CI builds and
# links every GPU file; default architectures: Ampere (sm_80) and Hopper (sm_90) as machine code,
# plus sm_90 PTX that newer GPUs JIT-compile.
if(KOLO_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
    set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
  endif()
  enable_language(CUDA)
endif()

set(_kolo_ucx_found FALSE)
if(NOT KOLO_WITH_UCX STREQUAL "OFF")
  pkg_check_modules(UCX QUIET IMPORTED_TARGET ucx)
  set(_kolo_ucx_found ${UCX_FOUND})
endif()
kolo_resolve_option(KOLO_WITH_UCX ${_kolo_ucx_found} "UCX (pkg-config ucx)")

# PMIx: the launcher's process-management interface (Open MPI's mpirun, srun --mpi=pmix), used
# before MPI starts so that kolo_init can time out naming the ranks that never called it.
# Debian's Open MPI depends on libpmix-dev, so it is there wherever Open MPI's headers are.
set(_kolo_pmix_found FALSE)
if(NOT KOLO_WITH_PMIX STREQUAL "OFF")
  pkg_check_modules(PMIX QUIET IMPORTED_TARGET pmix>=3)
  set(_kolo_pmix_found ${PMIX_FOUND})
endif()
kolo_resolve_option(KOLO_WITH_PMIX ${_kolo_pmix_found} "PMIx (pkg-config pmix)")
