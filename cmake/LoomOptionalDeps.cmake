# Detects the optional dependencies.  Each LOOM_WITH_<X> is AUTO, ON or OFF; the result is
# LOOM_HAVE_<X> (0/1), written into loom_build_config.h so tools can say what this build has.
find_package(PkgConfig QUIET)

function(loom_resolve name found)
  string(TOUPPER "${LOOM_WITH_${name}}" want)
  if(want STREQUAL "OFF")
    set(LOOM_HAVE_${name} 0 PARENT_SCOPE)
  elseif(found)
    set(LOOM_HAVE_${name} 1 PARENT_SCOPE)
  elseif(want STREQUAL "ON")
    message(FATAL_ERROR "LOOM_WITH_${name}=ON but it was not found")
  else()
    set(LOOM_HAVE_${name} 0 PARENT_SCOPE)
  endif()
endfunction()

set(_hwloc_found FALSE)
if(PkgConfig_FOUND AND NOT LOOM_WITH_HWLOC STREQUAL "OFF")
  pkg_check_modules(HWLOC IMPORTED_TARGET hwloc)
  set(_hwloc_found ${HWLOC_FOUND})
endif()
loom_resolve(HWLOC "${_hwloc_found}")

set(_ucx_found FALSE)
if(PkgConfig_FOUND AND NOT LOOM_WITH_UCX STREQUAL "OFF")
  pkg_check_modules(UCX IMPORTED_TARGET ucx)
  set(_ucx_found ${UCX_FOUND})
endif()
loom_resolve(UCX "${_ucx_found}")

set(_verbs_found FALSE)
if(NOT LOOM_WITH_VERBS STREQUAL "OFF")
  find_library(IBVERBS_LIBRARY ibverbs)
  find_library(RDMACM_LIBRARY rdmacm)
  find_path(IBVERBS_INCLUDE infiniband/verbs.h)
  if(IBVERBS_LIBRARY AND RDMACM_LIBRARY AND IBVERBS_INCLUDE)
    set(_verbs_found TRUE)
  endif()
endif()
loom_resolve(VERBS "${_verbs_found}")

set(_cuda_found FALSE)
if(NOT LOOM_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  # The kernels need nvcc as well as the runtime library.
  if(CUDAToolkit_FOUND AND CUDAToolkit_NVCC_EXECUTABLE AND EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
    set(_cuda_found TRUE)
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}" CACHE FILEPATH "nvcc")
    endif()
  endif()
endif()
loom_resolve(CUDA "${_cuda_found}")

set(_torch_found FALSE)
if(NOT LOOM_WITH_TORCH STREQUAL "OFF")
  # The Python that runs the tests (PATH's python3 unless Python3_EXECUTABLE is given), with its headers.
  find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
  if(Python3_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c "import torch" RESULT_VARIABLE _torch_rc OUTPUT_QUIET ERROR_QUIET)
    if(_torch_rc EQUAL 0)
      set(_torch_found TRUE)
    endif()
  endif()
endif()
loom_resolve(TORCH "${_torch_found}")

# libloom_nccl (bindings/nccl) implements the nccl.h it is compiled against: LOOM_NCCL_INCLUDE_DIR if given,
# else the nvidia-nccl wheel's of the Python in use (what torch installs), else the CUDA toolkit's.  nccl.h
# includes the toolkit's cuda_runtime.h.  LOOM_NCCL_REAL_LIBRARY: the real libnccl.so.2 beside that header,
# which the drop-in tests link a program against.
set(_nccl_api_found FALSE)
if(NOT LOOM_WITH_NCCL_API STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(NOT Python3_Interpreter_FOUND)
    find_package(Python3 QUIET COMPONENTS Interpreter)
  endif()
  set(_nccl_wheel "")
  if(Python3_Interpreter_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c
                    "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(next(iter(s.submodule_search_locations)) if s else '')"
                    OUTPUT_VARIABLE _nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  find_path(LOOM_NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_wheel}/include ${CUDAToolkit_INCLUDE_DIRS}
            DOC "directory of the nccl.h that libloom_nccl implements")
  if(LOOM_NCCL_INCLUDE_DIR)
    find_library(LOOM_NCCL_REAL_LIBRARY NAMES libnccl.so.2 nccl HINTS ${LOOM_NCCL_INCLUDE_DIR}/../lib
                 NO_DEFAULT_PATH DOC "the real libnccl.so.2 beside that nccl.h (drop-in tests)")
  endif()
  find_path(_cuda_runtime_h cuda_runtime.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(LOOM_NCCL_INCLUDE_DIR AND _cuda_runtime_h)
    set(_nccl_api_found TRUE)
  endif()
endif()
loom_resolve(NCCL_API "${_nccl_api_found}")

if(LOOM_BUILD_PERF)
  find_package(MPI QUIET COMPONENTS CXX)
  if(NOT MPI_CXX_FOUND)
    message(WARNING "MPI not found: the perf tools are not built (apt-get install libopenmpi-dev)")
    set(LOOM_BUILD_PERF OFF)
  endif()
endif()
