// The machine-readable outputs of the perf tools, beside nccl-tests' table: every timed iteration as
// CSV (--csv) and a JSON summary of the run (--json).  Written by rank 0 only.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace loom::perf {

struct RunInfo {
  std::string collective;  // "AllReduce"
  std::string backend;     // "loom" or "mpi"
  int nranks = 0;
  int iters = 0, warmup = 0, check = 0;
};

struct Measurement {
  std::string type, op, placement;  // "float", "sum", "out-of-place"
  size_t bytes = 0;
  double timeUs = 0, algbw = 0, busbw = 0;
  long wrong = 0;
  bool checked = false;
  // CPU seconds of all ranks together (user + system, every thread) per GB of the call's size: what a
  // library costs the machine for what it moves, beside how fast it moves it.
  double cpuSecPerGB = 0;
};

class Records {
 public:
  // Opens the files named (an empty path: that output is not wanted).  False, with *error set, when
  // one cannot be created.
  bool open(const std::string& csvPath, const std::string& jsonPath, const RunInfo& info, std::string* error);
  void add(const Measurement& m, const std::vector<double>& perIterUs);
  // Writes the JSON summary and closes both files; false when a write failed.
  bool finish(double avgBusbw, long totalWrong, std::string* error);
  ~Records();

 private:
  RunInfo info_;
  std::string jsonPath_;
  FILE* csv_ = nullptr;
  FILE* json_ = nullptr;
  std::vector<Measurement> rows_;
};

}  // namespace loom::perf
