// The driver shared by every *_perf tool: nccl-tests' flags, output columns and busbw factors, so
// existing scripts that run or parse nccl-tests keep working.  MPI launches the ranks and carries the
// unique id (and, with --backend mpi, runs OpenMPI's own collective through the same timing and
// checking loop, so both can be compared in one run).
#pragma once

#include <mpi.h>

#include <cstddef>

#include "loom.h"

namespace loom::perf {

struct Buffers {
  void* send;
  void* recv;
  size_t count;  // the count argument of the collective
};

struct PerfTest {
  const char* name;  // "AllReduce"
  bool usesOp;
  bool usesRoot;
  // Bus bandwidth = algorithm bandwidth x this (nccl-tests' factors).
  double (*busFactor)(int nranks);
  // For a message of `bytes`, the element counts of the send and receive buffers and of the call.
  void (*counts)(size_t bytes, size_t elemSize, int nranks, size_t* sendCount, size_t* recvCount, size_t* callCount);
  // `stream`: NULL for host buffers (the call is complete when it returns), a CUDA stream for --memory device.
  loomResult_t (*runLoom)(const Buffers& b, loomDataType_t type, loomRedOp_t op, int root, loomComm_t comm,
                          loomStream_t stream);
  // Returns an MPI error code; `inPlace` tells the MPI backend to pass MPI_IN_PLACE.
  int (*runMpi)(const Buffers& b, bool inPlace, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm);
  // Fills this rank's input before a checked run; counts wrong elements of the result afterwards.
  void (*fillInput)(const Buffers& b, loomDataType_t type, loomRedOp_t op, int root, int rank, int nranks);
  size_t (*countWrong)(const Buffers& b, loomDataType_t type, loomRedOp_t op, int root, int rank, int nranks);
  // false: the in-place columns print N/A (sendrecv has no in-place form)
  bool hasInPlace = true;
};

// Parses the command line, runs the sweep, prints the table; returns the process exit code.
int perfMain(int argc, char** argv, const PerfTest& test);

}  // namespace loom::perf
