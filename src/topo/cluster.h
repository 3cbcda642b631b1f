// The global view: every host's model and where each rank sits on it (its host, its device: a GPU or,
// for a CPU rank, the CPU of its NUMA node; its MIG instance; the NIC it uses).  The communicator builds
// one from what the ranks exchange at init; loom-topo builds one from fixture files to plan on paper.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "topo/system.h"

namespace loom {

struct RankPlace {
  int host = 0;
  int device = -1;  // node index in hosts[host]: a GPU, or the CPU for a CPU rank
  int mig = -1;     // MIG instance of the GPU, -1 for the whole GPU
  int nic = -1;     // NIC node in hosts[host], -1 if the host has none
  std::string nicReason;
};

struct Cluster {
  std::vector<std::shared_ptr<const TopoSystem>> hosts;
  std::vector<std::string> hostNames;
  std::vector<RankPlace> ranks;

  int nranks() const { return static_cast<int>(ranks.size()); }
  const TopoSystem& sys(int rank) const { return *hosts[ranks[rank].host]; }
  bool sameHost(int a, int b) const { return ranks[a].host == ranks[b].host; }
  bool isGpu(int rank) const;
  // "rank 3 (GPU3 on host h1)"
  std::string describe(int rank) const;
};

// Where a rank that joined a communicator sits on its host's model: on its GPU (found by PCI bus id)
// and, when the GPU is partitioned, on its MIG instance (found by the device's UUID, with or without the
// "MIG-" prefix); else on the CPU of its NUMA node.  NIC binding comes later (assignNics).
RankPlace placeRank(const TopoSystem& sys, int host, int numa, const std::string& gpuBusId, const std::string& gpuUuid);

// One rank per GPU of each host (GPU order), or, on hosts without GPUs, `cpuRanks` ranks spread over
// the CPUs (NUMA nodes) in turn.  Then binds every rank to a NIC (see decisions.h).
Cluster placeRanks(std::vector<std::shared_ptr<const TopoSystem>> hosts, int cpuRanksPerHost = 0);

// A fixture: a <system> file (one host, replicated `hosts` times) or a <cluster> file whose <host
// file="..."/> entries name <system> files relative to it.
loomResult_t loadCluster(const std::string& path, int hosts, std::vector<std::shared_ptr<const TopoSystem>>* out);

}  // namespace loom
