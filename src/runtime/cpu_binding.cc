#include "runtime/cpu_binding.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "base/params.h"
#include "runtime/comm.h"

namespace loom {

// Why: a waiting rank sleeps (it must not spin where ranks outnumber cores), and the kernel wakes a
// sleeper on the CPU of the one that woke it.  Two ranks that hand data back and forth then drift onto
// one CPU while the other idles: across two namespace hosts of a 2-core machine a 16 MB allreduce took
// 12-15 ms in 6 of 8 jobs and 5.0 ms in the other two; pinned by taskset, 5.2-7.1 ms in 8 of 8, and
// bound here, 5.1-8.8 ms in 8 of 8 (the drift also made loom-sim's validation a coin toss).  So a rank
// takes a share of the machine's CPUs as MPI launchers bind by default, but only where nothing chose
// for it:
//   - its thread may run on every online CPU (no launcher, taskset, numactl or cpuset bound it);
//   - it is the only rank of its process (in-process ranks share the caller's threads);
//   - the machine's ranks (every namespace host on this kernel) are no more than its CPUs;
//   - it is a CPU rank (a GPU rank's place is its GPU's, which the user's launcher knows better);
//   - once per process, at the first blocking init (splits and shrinks keep it).
// The share: the machine's CPUs in order, cut into as many equal blocks as the machine has ranks; the
// k-th rank of the machine (by rank) takes the k-th block.
std::string bindToShareOfMachine(const loomComm* comm) {
  static std::atomic<bool> done{false};
  if (params().BIND == 0) return "LOOM_BIND=0";
  if (done.load()) return "bound at an earlier init";
  const PeerInfo& self = comm->peers[comm->rank];
  int onMachine = 0, index = 0, inProcess = 0;
  for (const PeerInfo& p : comm->peers) {
    if (p.machineHash != self.machineHash) continue;
    if (p.pid == self.pid && p.pidNamespace == self.pidNamespace) ++inProcess;
    if (p.rank < self.rank) ++index;
    ++onMachine;
  }
  if (inProcess > 1) return "several ranks in this process";
  if (comm->cluster != nullptr && comm->cluster->isGpu(comm->rank)) return "a GPU rank";
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return "cannot read the CPU affinity";
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  if (online <= 0 || static_cast<long>(cpus.size()) != online) return "already bound (not every CPU)";
  if (onMachine < 2) return "alone on this machine";
  if (onMachine > static_cast<int>(cpus.size())) return "more ranks than CPUs on this machine";
  const size_t block = cpus.size() / static_cast<size_t>(onMachine);
  cpu_set_t share;
  CPU_ZERO(&share);
  std::string list;
  for (size_t i = 0; i < block; ++i) {
    const int c = cpus[static_cast<size_t>(index) * block + i];
    CPU_SET(c, &share);
    list += (list.empty() ? "" : ",") + std::to_string(c);
  }
  if (sched_setaffinity(0, sizeof share, &share) != 0) return "sched_setaffinity failed";
  done.store(true);
  return "bound to CPU " + list + " (rank " + std::to_string(index) + " of " + std::to_string(onMachine) +
         " on this machine)";
}

}  // namespace loom
