// Every LOOM_* environment parameter, declared once, one line each: name, type, default, help.
// loom-info prints this table; nothing else in the code calls getenv() for a LOOM_ variable.
#pragma once

#include <cstdint>
#include <string>

#include "loom.h"

namespace loom {

// X(NAME, TYPE, DEFAULT, RANGE, HELP): the environment variable is LOOM_<NAME>.
// TYPE is Int (signed decimal), Size (bytes, optional K/M/G/T suffix) or String.  RANGE is "lo..hi" or
// "lo..hi/step" (a multiple of step), in the type's own notation, "" for strings: a value outside it is
// refused at init with loomInvalidArgument naming the variable, so no code below checks it again.
#define LOOM_PARAM_LIST(X)                                                                                          \
  X(DEBUG, String, "WARN", "", "log level: NONE, WARN, INFO or TRACE")                                                  \
  X(DEBUG_SUBSYS, String, "ALL", "",                                                                                    \
    "subsystems to log, comma separated: INIT,BOOTSTRAP,TRANSPORT,COLL,ALGO,TOPO,NET,ENV or ALL; ^ excludes")        \
  X(DEBUG_FILE, String, "", "", "write log lines to this file instead of stderr; %h is the host name, %p the pid")      \
  X(TIMEOUT, Int, "300", "1..31536000", "seconds any blocking wait (bootstrap, connect, collective) may last before loomTimeout")   \
  X(COMM_ID, String, "", "", "host:port where the bootstrap root listens; rank 0 listens there (for launchers)")         \
  X(SOCKET_IFNAME, String, "", "",                                                                                      \
    "interfaces for bootstrap sockets: comma list of name prefixes, ^ excludes, = exact; default first non-lo up")   \
  X(SOCKET_FAMILY, String, "", "", "AF_INET or AF_INET6 to force the bootstrap address family")                          \
  X(SHM_SLOT_SIZE, Size, "256K", "4K..1G/64", "bytes per slot of a shared-memory FIFO: the pipelining chunk between two ranks")  \
  X(SHM_NSLOTS, Int, "4", "2..64", "slots per shared-memory FIFO")    \
  X(SHM_DISABLE, Int, "0", "0..1", "1: never use shared memory (ranks on one host then talk over the network transport)")  \
  X(NET_SLOT_SIZE, Size, "256K", "4K..1G/64", "bytes per slot of a network connection's rings (socket, ucx, ib): the largest frame and the pipelining chunk across hosts") \
  X(NET_NSLOTS, Int, "4", "2..64", "slots per network connection ring: frames in flight per connection before the sender waits") \
  X(NET, String, "", "", "network transport between hosts: socket, ucx or ib; default: ib where an RDMA port is active, else socket") \
  X(IB_HCA, String, "", "", "RDMA devices the ib transport may use: comma list of name prefixes, ^ excludes, = exact; default: the first with an active port") \
  X(IB_GID_INDEX, Int, "-1", "-1..65535", "GID table index for RoCE and iWARP; -1: the first RoCE v2 entry (else 0)")                  \
  X(IB_WRITE_IMM, Int, "1", "0..1", "1: signal each RDMA write with an immediate where the device has it; 0: always write + SEND")  \
  X(IB_QPS_PER_CONNECTION, Int, "1", "1..16", "RC queue pairs per ib connection: frames are striped over them by slot; the receiver's value holds") \
  X(IB_MR_CACHE, Size, "64M", "0..1T", "registered ring memory of closed ib connections kept for the next ones (bytes); 0: deregister at once") \
  X(IB_GDR_CACHE, Int, "64", "1..65536", "GPU buffers kept registered with the RDMA device for GPUDirect RDMA (allocations); the least recently used goes first") \
  X(IB_ODP, Int, "1", "0..1", "1: send from and receive into callers' host buffers (zero copy) where the RDMA device has implicit on-demand paging; 0: always through the slots") \
  X(IB_READ_MIN, Size, "16K", "0..1G", "smallest message the ib receiver reads from the sender's buffer (RDMA READ, zero copy); smaller ones are written into its slot") \
  X(IB_CM, Int, "-1", "-1..1", "how ib queue pairs connect: 1 rdma_cm (rdma_connect/accept), 0 QP attributes over TCP, -1 rdma_cm on iWARP only") \
  X(NSOCKS, Int, "1", "1..16", "TCP sockets per socket-transport connection; frames of 64 KB and more are striped over them") \
  X(SHM_DIRECT_MIN, Size, "64K", "0..1T",                                                                                    \
    "messages over shared memory from this size on are copied once, straight from the sender's memory (0: never)") \
  X(SPIN_US, Int, "-1", "-1..10000000", "microseconds a waiting rank spins before it yields; -1 = automatic (50, none when ranks > cores, when a thread of this process answers, or in a socket call of 4 MB or more)") \
  X(YIELD_US, Int, "-1", "-1..10000000", "microseconds a waiting rank yields its core (sched_yield) before it sleeps; -1 = automatic (1000, none when ranks > cores and a communicator has ranks on other hosts, or in a socket call of 4 MB or more)") \
  X(BIND, Int, "1", "0..1", "1: a CPU rank that nothing bound (it may run on every CPU) takes its share of this machine's CPUs, when its ranks are no more than its cores (one rank per process, blocking init); 0: never change CPU affinity") \
  X(SIMD, String, "auto", "", "reduction kernels: auto, avx2 or generic")                                               \
  X(TOPO_FILE, String, "", "", "NCCL-format topology XML to load; merged with what is detected, by PCI bus id")         \
  X(TOPO_DUMP_FILE, String, "", "", "write the host's topology (detected, merged with LOOM_TOPO_FILE) to this XML file") \
  X(P2P_LEVEL, String, "PXB", "", "GPU peer-to-peer up to this path type: LOC, NVL, NVB, PIX, PXB, PHB or SYS")         \
  X(NET_GDR_LEVEL, String, "PXB", "", "GPUDirect RDMA when NIC and GPU are at most this far apart (path type as above)") \
  X(ALGO, String, "", "", "algorithms allowed: comma list of names (loom-info lists them); ^ excludes; default: the model picks") \
  X(CHUNK_SIZE, Size, "0", "0..1G", "largest piece an algorithm moves per step (0: one transport slot)")                        \
  X(NCHANNELS, Int, "0", "0..16", "rings a large ring allreduce is split over, each on its own connections (0: one per planned ring, i.e. NIC rail)") \
  X(CUDA, Int, "1", "0..1", "1: recognise device buffers and CUDA streams when this build has CUDA and a GPU is visible; 0: never call the CUDA runtime") \
  X(DEVICE_P2P, Int, "1", "0..1", "1: device-buffer collectives of ranks on one host read each other's GPU memory (CUDA IPC) where every GPU reaches the others; 0: always stage through host memory") \
  X(TUNE_PROBE, Int, "1", "0..1", "1: measure latency and copy bandwidth at init (a few ms) to refine the cost model; 0: constants")

enum class ParamType { Int, Size, String };

struct ParamSpec {
  const char* name;  // without the LOOM_ prefix
  ParamType type;
  const char* defaultValue;
  const char* range;  // "lo..hi" or "lo..hi/step"; "" for strings
  const char* help;
};

// The parsed values, one field per parameter (Int and Size are int64_t).
struct Params {
#define LOOM_PARAM_FIELD_Int int64_t
#define LOOM_PARAM_FIELD_Size int64_t
#define LOOM_PARAM_FIELD_String std::string
#define LOOM_PARAM_DECLARE(name, type, def, range, help) LOOM_PARAM_FIELD_##type name;
  LOOM_PARAM_LIST(LOOM_PARAM_DECLARE)
#undef LOOM_PARAM_DECLARE
};

// Parsed once per process from the environment.  A malformed value keeps the default and is reported
// by paramsCheck(), which every communicator init calls so that the user gets loomInvalidArgument.
const Params& params();
loomResult_t paramsCheck();
// Re-reads the environment.  Tests only, in a single-threaded process (e.g. a freshly forked rank).
void paramsReloadForTesting();

// The table, for loom-info.
const ParamSpec* paramTable(int* count);
// Current value of table entry i as text ("<unset>" where the environment does not set it).
std::string paramEnvText(int i);

// Parses one value of the given type; returns false (and a reason) for malformed input.
// Exposed for tests and the fuzzer.
bool parseParamValue(ParamType type, const char* text, int64_t* intOut, std::string* why);
// The bounds and step of `range` (ParamSpec::range): false for "" (no range) or a malformed one.
bool paramRangeBounds(ParamType type, const char* range, int64_t* lo, int64_t* hi, int64_t* step);
// Whether v lies in `range` ("" admits anything); else false and the reason.
bool paramInRange(ParamType type, const char* range, int64_t v, std::string* why);

}  // namespace loom
