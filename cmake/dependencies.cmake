# Required: MPI, hwloc, FlatBuffers, spdlog, threads. Optional (AUTO|ON|OFF): CUDA+NCCL, UCX,
# PMIx (bounds kolo_init's start: runtime/world/start_fence.h).
find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS C CXX)
find_package(PkgConfig REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc>=2.0)
# Debian ships FlatBuffersConfig.cmake; only flatc and the header-only builder/verifier are used.
find_package(flatbuffers NAMES FlatBuffers flatbuffers REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3 REQUIRED)  # tuning files (collectives/select/cost_model.cc)

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
