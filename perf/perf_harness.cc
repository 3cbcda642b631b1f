#include "perf/perf_harness.h"
#include "perf/perf_device.h"
#include "perf/size_arg.h"

#include <getopt.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/datatypes.h"
#include "perf/perf_records.h"

namespace loom::perf {

namespace {

// CPU time this process used so far, all its threads (a library's helper threads count too).
double processCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}


struct Options {
  size_t minBytes = 32 << 20, maxBytes = 32 << 20, stepBytes = 1 << 20;
  double stepFactor = 1;
  int iters = 20, warmup = 5, check = 1, average = 1, root = 0, timeoutSec = 0;
  std::vector<loomDataType_t> types = {loomFloat32};
  std::vector<loomRedOp_t> ops = {loomSum};
  bool mpiBackend = false;
  bool outOfPlace = true, inPlace = true;  // --placement
  bool deviceMemory = false;              // --memory device
  std::string csvPath, jsonPath;          // --csv, --json (rank 0 writes them)
};

// Long options without a short form.
enum LongOnly { kCsv = 1000, kJson, kPlacement, kMemory };

void usage(FILE* out, const char* prog) {
  std::fprintf(out,
      "usage: mpirun -np N %s [options]\n"
      "nccl-tests compatible benchmark of loom (or, with --backend mpi, of the MPI library's own collective).\n"
      "  -b, --minbytes <size>      smallest message (default 32M; K/M/G suffixes)\n"
      "  -e, --maxbytes <size>      largest message (default 32M)\n"
      "  -i, --stepbytes <size>     increment between sizes (default 1M)\n"
      "  -f, --stepfactor <x>       multiply sizes by x instead of adding stepbytes\n"
      "  -n, --iters <n>            timed iterations per size (default 20)\n"
      "  -w, --warmup_iters <n>     untimed iterations before each size (default 5)\n"
      "  -c, --check <0/1>          check results (default 1); #wrong counts wrong elements on all ranks\n"
      "  -d, --datatype <t>         int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, or all\n"
      "  -o, --op <op>              sum prod max min avg, or all (collectives that reduce)\n"
      "  -r, --root <rank>          root rank (collectives with a root; default 0)\n"
      "  -a, --average <0..3>       time reported: 0 rank 0's, 1 mean (default), 2 min, 3 max over ranks\n"
      "  -T, --timeout <s>          loom timeout for every wait (default LOOM_TIMEOUT)\n"
      "  -B, --backend <loom|mpi>   library measured (default loom)\n"
      "      --placement <both|out|in>  measure out-of-place, in-place or both (default both); the other\n"
      "                             columns print N/A\n"
      "      --memory <host|device>  where the buffers live (default host); device: cudaMalloc'd buffers\n"
      "                             and the calls issued on a CUDA stream, as nccl-tests does (CUDA builds)\n"
      "      --csv <file>           every timed iteration as CSV: collective, backend, ranks, type, op,\n"
      "                             placement, bytes, iteration, time (us, the slowest rank's)\n"
      "      --json <file>          a summary: the run's settings and, per size and placement, time (us),\n"
      "                             CPU seconds of all ranks per GB (cpu_s_per_gb: user + system time\n"
      "                             of every thread, from getrusage),\n"
      "                             algbw, busbw (GB/s) and #wrong\n"
      "  -t, -g, -m, -p, -z, -G     accepted for nccl-tests compatibility: only 1 thread, 1 device, no\n"
      "                             aggregation, no graphs; other values are refused\n"
      "  -h, --help                 this text\n"
      "Output: one line per size with out-of-place then in-place time (us), algbw and busbw (GB/s) and\n"
      "#wrong, then '# Avg bus bandwidth'.  Exit code 1 when any result was wrong, 2 for bad options, 3 when\n"
      "a call failed, 4 when the --csv or --json file could not be written.\n",
      prog);
}

bool parseInt(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// Returns -1 to continue, otherwise an exit code.
int parseOptions(int argc, char** argv, Options* o, int rank) {
  static const option longOpts[] = {
      {"nthreads", required_argument, nullptr, 't'},     {"ngpus", required_argument, nullptr, 'g'},
      {"minbytes", required_argument, nullptr, 'b'},     {"maxbytes", required_argument, nullptr, 'e'},
      {"stepbytes", required_argument, nullptr, 'i'},    {"stepfactor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},        {"warmup_iters", required_argument, nullptr, 'w'},
      {"agg_iters", required_argument, nullptr, 'm'},    {"check", required_argument, nullptr, 'c'},
      {"datatype", required_argument, nullptr, 'd'},     {"op", required_argument, nullptr, 'o'},
      {"root", required_argument, nullptr, 'r'},         {"average", required_argument, nullptr, 'a'},
      {"parallel_init", required_argument, nullptr, 'p'}, {"blocking", required_argument, nullptr, 'z'},
      {"cudagraph", required_argument, nullptr, 'G'},    {"timeout", required_argument, nullptr, 'T'},
      {"backend", required_argument, nullptr, 'B'},      {"help", no_argument, nullptr, 'h'},
      {"csv", required_argument, nullptr, kCsv},         {"json", required_argument, nullptr, kJson},
      {"placement", required_argument, nullptr, kPlacement}, {"memory", required_argument, nullptr, kMemory},
      {nullptr, 0, nullptr, 0}};
  auto bad = [&](const char* what, const char* value) {
    if (rank == 0) std::fprintf(stderr, "%s: invalid %s '%s' (see --help)\n", argv[0], what, value);
    return 2;
  };
  int c, v;
  while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:w:m:c:d:o:r:a:p:z:G:T:B:h", longOpts, nullptr)) != -1) {
    switch (c) {
      case 'b': if (!parseSize(optarg, &o->minBytes)) return bad("size", optarg); break;
      case 'e': if (!parseSize(optarg, &o->maxBytes)) return bad("size", optarg); break;
      case 'i': if (!parseSize(optarg, &o->stepBytes) || o->stepBytes == 0) return bad("step", optarg); break;
      case 'f': {
        char* end = nullptr;
        o->stepFactor = std::strtod(optarg, &end);
        if (end == optarg || *end != '\0' || o->stepFactor < 1) return bad("step factor", optarg);
        break;
      }
      case 'n': if (!parseInt(optarg, 1, 1 << 30, &o->iters)) return bad("iteration count", optarg); break;
      case 'w': if (!parseInt(optarg, 0, 1 << 30, &o->warmup)) return bad("warmup count", optarg); break;
      case 'c': if (!parseInt(optarg, 0, 1, &o->check)) return bad("check flag", optarg); break;
      case 'a': if (!parseInt(optarg, 0, 3, &o->average)) return bad("average mode", optarg); break;
      case 'r': if (!parseInt(optarg, 0, 1 << 30, &o->root)) return bad("root", optarg); break;
      case 'T': if (!parseInt(optarg, 1, 1 << 20, &o->timeoutSec)) return bad("timeout", optarg); break;
      case 't': case 'g': case 'm': if (!parseInt(optarg, 1, 1, &v)) return bad("value (only 1 is supported)", optarg); break;
      case 'p': case 'z': case 'G': if (!parseInt(optarg, 0, 1, &v)) return bad("flag", optarg); break;
      case 'd': {
        o->types.clear();
        for (int t = 0; t < loomNumTypes; ++t)
          if (!std::strcmp(optarg, "all") || !std::strcmp(optarg, typeName(static_cast<loomDataType_t>(t))))
            o->types.push_back(static_cast<loomDataType_t>(t));
        if (o->types.empty()) return bad("datatype", optarg);
        break;
      }
      case 'o': {
        o->ops.clear();
        for (int k = 0; k < loomNumOps; ++k)
          if (!std::strcmp(optarg, "all") || !std::strcmp(optarg, opName(static_cast<loomRedOp_t>(k))))
            o->ops.push_back(static_cast<loomRedOp_t>(k));
        if (o->ops.empty()) return bad("op", optarg);
        break;
      }
      case 'B':
        if (!std::strcmp(optarg, "mpi")) o->mpiBackend = true;
        else if (std::strcmp(optarg, "loom") != 0) return bad("backend", optarg);
        break;
      case kCsv: if (!*optarg) return bad("csv file", optarg); o->csvPath = optarg; break;
      case kJson: if (!*optarg) return bad("json file", optarg); o->jsonPath = optarg; break;
      case kPlacement:
        if (!std::strcmp(optarg, "out")) o->inPlace = false;
        else if (!std::strcmp(optarg, "in")) o->outOfPlace = false;
        else if (std::strcmp(optarg, "both") != 0) return bad("placement", optarg);
        break;
      case kMemory:
        if (!std::strcmp(optarg, "device")) o->deviceMemory = true;
        else if (std::strcmp(optarg, "host") != 0) return bad("memory", optarg);
        break;
      case 'h': if (rank == 0) usage(stdout, argv[0]); return 0;
      default: if (rank == 0) usage(stderr, argv[0]); return 2;
    }
  }
  if (optind < argc) return bad("argument", argv[optind]);
  if (o->minBytes > o->maxBytes) return bad("range: minbytes above maxbytes", "");
  return -1;
}

MPI_Datatype mpiType(loomDataType_t t) {
  switch (t) {
    case loomInt8: return MPI_INT8_T;
    case loomUint8: return MPI_UINT8_T;
    case loomInt32: return MPI_INT32_T;
    case loomUint32: return MPI_UINT32_T;
    case loomInt64: return MPI_INT64_T;
    case loomUint64: return MPI_UINT64_T;
    case loomFloat32: return MPI_FLOAT;
    case loomFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;  // MPI has no float16 / bfloat16
  }
}

MPI_Op mpiOp(loomRedOp_t op) {
  switch (op) {
    case loomSum: return MPI_SUM;
    case loomProd: return MPI_PROD;
    case loomMax: return MPI_MAX;
    case loomMin: return MPI_MIN;
    default: return MPI_OP_NULL;  // MPI has no average
  }
}

// Page-aligned, zeroed buffers, as nccl-tests gets from cudaMalloc (and independent of how the MPI
// library has tuned malloc); with --memory device, cudaMalloc'd buffers with such a host mirror, through
// which inputs are written and results read.
class PerfBuffer {
 public:
  PerfBuffer(size_t bytes, bool device) : bytes_(bytes) {
    size_t len = (bytes + 4095) / 4096 * 4096 + 4096;
    if (posix_memalign(&host_, 4096, len) != 0) {
      std::fprintf(stderr, "out of memory allocating %zu bytes\n", len);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::memset(host_, 0, len);
    if (device && (device_ = deviceAlloc(std::max<size_t>(bytes, 1))) == nullptr) {
      std::fprintf(stderr, "out of device memory allocating %zu bytes\n", bytes);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  ~PerfBuffer() {
    std::free(host_);
    if (device_ != nullptr) deviceFree(device_);
  }
  PerfBuffer(const PerfBuffer&) = delete;
  PerfBuffer& operator=(const PerfBuffer&) = delete;
  char* data() const { return static_cast<char*>(device_ != nullptr ? device_ : host_); }  // what the calls get
  char* host() const { return static_cast<char*>(host_); }
  size_t bytes() const { return bytes_; }
  bool upload() const { return device_ == nullptr || copyToDevice(device_, host_, bytes_); }
  bool download() const { return device_ == nullptr || copyToHost(host_, device_, bytes_); }

 private:
  size_t bytes_;
  void* host_ = nullptr;
  void* device_ = nullptr;
};

// A size's buffers: the calls use data(); inputs are written and results read on the host mirrors.
struct BufferSet {
  std::vector<const PerfBuffer*> all;
  void* onHost(void* p) const {
    const auto at = reinterpret_cast<uintptr_t>(p);
    for (const PerfBuffer* b : all) {
      const auto base = reinterpret_cast<uintptr_t>(b->data());
      if (b->data() != b->host() && at >= base && at <= base + b->bytes()) return b->host() + (at - base);
    }
    return p;
  }
  Buffers onHost(const Buffers& b) const { return Buffers{onHost(b.send), onHost(b.recv), b.count}; }
  bool upload() const {
    for (const PerfBuffer* b : all)
      if (!b->upload()) return false;
    return true;
  }
  bool download() const {
    for (const PerfBuffer* b : all)
      if (!b->download()) return false;
    return true;
  }
};

struct Runner {
  const PerfTest& test;
  const Options& o;
  int rank, nranks;
  loomComm_t comm;
  void* stream;  // a CUDA stream with --memory device, else NULL
  const BufferSet* set = nullptr;

  bool run(const Buffers& b, bool inPlace, loomDataType_t type, loomRedOp_t op) const {
    if (o.mpiBackend) return test.runMpi(b, inPlace, mpiType(type), mpiOp(op), o.root, MPI_COMM_WORLD) == MPI_SUCCESS;
    loomResult_t r = test.runLoom(b, type, op, o.root, comm, stream);
    if (r == loomSuccess && stream != nullptr) {
      if (!streamSynchronize(stream)) {
        std::fprintf(stderr, "rank %d: synchronizing the CUDA stream failed\n", rank);
        return false;
      }
      loomCommGetAsyncError(comm, &r);  // a stream call reports its failure here
    }
    if (r != loomSuccess) std::fprintf(stderr, "rank %d: %s\n", rank, loomGetLastError(comm));
    return r == loomSuccess;
  }

  // A one-element allreduce: every rank returns once all have called it.
  bool libraryBarrier() const {
    float one = 1.0f;
    loomResult_t r = loomAllReduce(&one, &one, 1, loomFloat32, loomSum, comm, nullptr);
    if (r != loomSuccess) std::fprintf(stderr, "rank %d: %s\n", rank, loomGetLastError(comm));
    return r == loomSuccess;
  }

  // Mean time per call in microseconds (combined over ranks per -a), and wrong elements over all ranks.
  // perIter (rank 0) gets each timed iteration's time on the slowest rank.
  // *cpuSec: CPU seconds (user + system, every thread of every rank) per timed call.
  bool measure(const Buffers& b, bool inPlace, loomDataType_t type, loomRedOp_t op, double* usec, double* cpuSec,
               long* wrong, std::vector<double>* perIter) const {
    for (int i = 0; i < o.warmup; ++i)
      if (!run(b, inPlace, type, op)) return false;
    MPI_Barrier(MPI_COMM_WORLD);
    // Then the measured library's own barrier, so that the timed calls start as that library releases its
    // ranks: with more ranks than cores, ranks leave OpenMPI's barrier milliseconds apart (its waiters
    // poll for their turn), and 20 timed calls of loom's 8-byte broadcast at 2 hosts x 2 ranks then took
    // 150 us each where 300 took 30.
    if (!o.mpiBackend && !libraryBarrier()) return false;
    // Each iteration is timed only when --csv asks for it: a clock read per call would weigh on the
    // sub-microsecond sizes of every other run.
    const bool perIteration = !o.csvPath.empty();
    std::vector<double> mineIter(perIteration ? static_cast<size_t>(o.iters) : 0);
    const double cpu0 = processCpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    auto last = t0;
    for (int i = 0; i < o.iters; ++i) {
      if (!run(b, inPlace, type, op)) return false;
      if (perIteration) {
        const auto now = std::chrono::steady_clock::now();
        mineIter[static_cast<size_t>(i)] = std::chrono::duration<double, std::micro>(now - last).count();
        last = now;
      }
    }
    if (!perIteration) last = std::chrono::steady_clock::now();
    double mine = std::chrono::duration<double, std::micro>(last - t0).count() / o.iters;
    const double cpuMine = (processCpuSeconds() - cpu0) / o.iters;
    MPI_Allreduce(&cpuMine, cpuSec, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    perIter->assign(mineIter.size(), 0.0);
    if (perIteration)
      MPI_Reduce(mineIter.data(), perIter->data(), o.iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    double sum = 0, mn = 0, mx = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &mn, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Bcast(&mine, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    *usec = o.average == 0 ? mine : o.average == 1 ? sum / nranks : o.average == 2 ? mn : mx;
    long w = 0;
    if (o.check) {
      test.fillInput(set->onHost(b), type, op, o.root, rank, nranks);
      if (!set->upload() || !run(b, inPlace, type, op) || !set->download()) return false;
      w = static_cast<long>(test.countWrong(set->onHost(b), type, op, o.root, rank, nranks));
    }
    MPI_Allreduce(&w, wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return true;
  }
};

// Seconds per GB of `bytes`; 0 for a size that rounds to no element (JSON has no infinity).
double perGB(double seconds, size_t bytes) { return bytes > 0 ? seconds / (static_cast<double>(bytes) / 1e9) : 0.0; }

std::string formatTime(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
  return buf;
}

}  // namespace

int perfMain(int argc, char** argv, const PerfTest& test) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  Options o;
  int early = parseOptions(argc, argv, &o, rank);
  if (early < 0 && test.usesRoot && o.root >= nranks) {
    if (rank == 0) std::fprintf(stderr, "%s: root %d is not a rank of %d\n", argv[0], o.root, nranks);
    early = 2;
  }
  if (early >= 0) {
    MPI_Finalize();
    return early;
  }
  if (o.mpiBackend) {  // drop what MPI cannot express rather than fail the whole sweep
    std::vector<loomDataType_t> t;
    for (auto x : o.types)
      if (mpiType(x) != MPI_DATATYPE_NULL) t.push_back(x);
    std::vector<loomRedOp_t> p;
    for (auto x : o.ops)
      if (mpiOp(x) != MPI_OP_NULL) p.push_back(x);
    if ((t.empty() || (test.usesOp && p.empty()))) {
      if (rank == 0) std::fprintf(stderr, "the mpi backend has no float16/bfloat16 types and no avg op\n");
      MPI_Finalize();
      return 2;
    }
    o.types = t;
    o.ops = p;
  }
  if (!test.usesOp) o.ops = {loomSum};
  void* stream = nullptr;
  if (o.deviceMemory) {  // every rank has the same options: the split below is collective on all or none
    // Each rank takes the GPU of its rank on this host (modulo the GPUs there).
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    int localRank = 0;
    MPI_Comm_rank(local, &localRank);
    MPI_Comm_free(&local);
    std::string why;
    if (o.mpiBackend || !deviceAvailable(localRank, &why) || (stream = streamCreate()) == nullptr) {
      if (rank == 0)
        std::fprintf(stderr, "%s: --memory device: %s\n", argv[0],
                     o.mpiBackend ? "only with --backend loom (the MPI library may not take device buffers)"
                                  : why.empty() ? "creating a CUDA stream failed" : why.c_str());
      MPI_Finalize();
      return 2;
    }
  }

  loomComm_t comm = nullptr;
  if (!o.mpiBackend) {
    loomUniqueId id;
    if (rank == 0 && loomGetUniqueId(&id) != loomSuccess) {
      std::fprintf(stderr, "loomGetUniqueId: %s\n", loomGetLastError(nullptr));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
    if (o.timeoutSec > 0) cfg.timeoutSec = o.timeoutSec;
    cfg.commName = test.name;
    if (loomCommInitRankConfig(&comm, nranks, id, rank, &cfg) != loomSuccess) {
      std::fprintf(stderr, "rank %d: loomCommInitRank: %s\n", rank, loomGetLastError(nullptr));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }

  // Rank 0 writes the CSV and JSON files; every rank learns whether it could create them.
  Records records;
  int opened = 1;
  if (rank == 0) {
    std::string error;
    if (!records.open(o.csvPath, o.jsonPath, RunInfo{test.name, o.mpiBackend ? "mpi" : "loom", nranks, o.iters,
                                                      o.warmup, o.check},
                      &error)) {
      std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
      opened = 0;
    }
  }
  MPI_Bcast(&opened, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!opened) {
    if (comm != nullptr) loomCommDestroy(comm);
    MPI_Finalize();
    return 2;
  }

  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  if (rank == 0) {
    int version = 0;
    loomGetVersion(&version);
    std::printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %g(%s) warmup iters: %d iters: %d agg iters: 1 "
                "validation: %d graph: 0\n#\n",
                o.minBytes, o.maxBytes, o.stepFactor > 1 ? o.stepFactor : static_cast<double>(o.stepBytes),
                o.stepFactor > 1 ? "factor" : "bytes", o.warmup, o.iters, o.check);
    std::printf("# Backend: %s (%s)\n#\n# Using devices\n", o.mpiBackend ? "mpi" : "loom",
                o.mpiBackend ? "the MPI library's own collective" : "loom, host memory");
  }
  // One line per rank, printed by rank 0 in rank order (mpirun forwards each rank's stdout on its own).
  char mine[128];
  std::snprintf(mine, sizeof(mine), "#  Rank %2d Group  0 Pid %6d on %10s device  -1 [host] host memory", rank,
                static_cast<int>(getpid()), host);
  std::vector<char> all(rank == 0 ? sizeof(mine) * nranks : 1);
  MPI_Gather(mine, sizeof(mine), MPI_CHAR, all.data(), sizeof(mine), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int r = 0; r < nranks; ++r) std::printf("%s\n", &all[r * sizeof(mine)]);
  if (rank == 0) {
    std::printf("#\n#%72s%35s\n", "out-of-place", "in-place");
    std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop",
                "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
                "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  }

  Runner runner{test, o, rank, nranks, comm, stream};
  double busSum = 0;
  int busCount = 0;
  long totalWrong = 0;
  bool failed = false;
  for (loomDataType_t type : o.types) {
    for (loomRedOp_t op : o.ops) {
      size_t es = typeSize(type);
      for (size_t bytes = o.minBytes; bytes <= o.maxBytes && !failed;) {
        size_t sendCount, recvCount, callCount;
        test.counts(bytes, es, nranks, &sendCount, &recvCount, &callCount);
        PerfBuffer sendBuf(sendCount * es, o.deviceMemory), recvBuf(recvCount * es, o.deviceMemory),
            inPlaceBuf(std::max(sendCount, recvCount) * es, o.deviceMemory);
        BufferSet set{{&sendBuf, &recvBuf, &inPlaceBuf}};
        runner.set = &set;
        Buffers outOfPlace{sendBuf.data(), recvBuf.data(), callCount};
        // In place, one buffer holds both, laid out as NCCL defines it: allgather's send block is the
        // rank's slot of the output, reducescatter's output is the rank's slot of the input.
        Buffers inPlace{inPlaceBuf.data(), inPlaceBuf.data(), callCount};
        if (sendCount < recvCount) inPlace.send = inPlaceBuf.data() + rank * sendCount * es;
        if (sendCount > recvCount) inPlace.recv = inPlaceBuf.data() + rank * recvCount * es;
        test.fillInput(set.onHost(outOfPlace), type, op, o.root, rank, nranks);
        test.fillInput(set.onHost(inPlace), type, op, o.root, rank, nranks);
        if (!set.upload()) {
          std::fprintf(stderr, "rank %d: copying the inputs to the device failed\n", rank);
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
        std::string line;
        char buf[256];
        std::snprintf(buf, sizeof(buf), "%12zu  %12zu  %8s  %6s  %6d", std::max(sendCount, recvCount) * es,
                      std::max(sendCount, recvCount), typeName(type), test.usesOp ? opName(op) : "none",
                      test.usesRoot ? o.root : -1);
        line = buf;
        for (bool isInPlace : {false, true}) {
          if ((isInPlace && !test.hasInPlace) || (isInPlace ? !o.inPlace : !o.outOfPlace)) {
            std::snprintf(buf, sizeof(buf), "  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
            line += buf;
            continue;
          }
          const Buffers& b = isInPlace ? inPlace : outOfPlace;
          double usec = 0, cpuSec = 0;
          long wrong = 0;
          std::vector<double> perIter;
          if (!runner.measure(b, isInPlace, type, op, &usec, &cpuSec, &wrong, &perIter)) {
            failed = true;
            break;
          }
          double algbw = static_cast<double>(std::max(sendCount, recvCount) * es) / usec / 1e3;
          double busbw = algbw * test.busFactor(nranks);
          busSum += busbw;
          ++busCount;
          totalWrong += wrong;
          if (rank == 0)
            records.add(Measurement{typeName(type), test.usesOp ? opName(op) : "none",
                                    isInPlace ? "in-place" : "out-of-place", std::max(sendCount, recvCount) * es, usec,
                                    algbw, busbw, wrong, o.check != 0,
                                    perGB(cpuSec, std::max(sendCount, recvCount) * es)},
                        perIter);
          std::snprintf(buf, sizeof(buf), "  %7s  %6.2f  %6.2f  %6s", formatTime(usec).c_str(), algbw, busbw,
                        o.check ? std::to_string(wrong).c_str() : "N/A");
          line += buf;
        }
        if (rank == 0 && !failed) std::printf("%s\n", line.c_str());
        std::fflush(stdout);
        size_t next = o.stepFactor > 1 ? static_cast<size_t>(static_cast<double>(bytes) * o.stepFactor) : bytes + o.stepBytes;
        if (next <= bytes) break;
        bytes = next;
      }
    }
  }
  bool written = true;
  if (rank == 0) {
    std::printf("# Out of bounds values : %ld %s\n", totalWrong, totalWrong == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth    : %g \n#\n", busCount ? busSum / busCount : 0.0);
    std::string error;
    written = records.finish(busCount ? busSum / busCount : 0.0, totalWrong, &error);
    if (!written) std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
  }
  if (comm != nullptr) loomCommDestroy(comm);
  if (stream != nullptr) streamDestroy(stream);
  MPI_Finalize();
  return failed ? 3 : totalWrong != 0 ? 1 : !written ? 4 : 0;
}

}  // namespace loom::perf
