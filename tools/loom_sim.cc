// loom-sim: what a collective would cost on a machine you may not have.  From a topology (this machine
// as detected, an NCCL-format XML file or a <cluster> of them, replicated over --hosts), it places the
// ranks and plans the routes as the library does (topo/), prices every algorithm with the library's cost
// model and routes its traffic link by link (sim/simulate.h), and prints the table the nccl-tests perf
// tool would print, followed by which algorithm the library would run and which link limits it.
#include <getopt.h>
#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/datatypes.h"
#include "base/params.h"
#include "loom.h"
#include "sim/simulate.h"
#include "topo/cluster.h"
#include "topo/decisions.h"
#include "topo/detect.h"
#include "topo/routes.h"
#include "tool_cluster.h"

namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "usage: loom-sim [options]\n"
               "Predicts the time of a collective per size on a machine, as the nccl-tests tool would print it,\n"
               "from the library's own rank placement, routes and cost model: no hardware is used.  Every\n"
               "algorithm is priced; the table shows the one loom would choose (LOOM_ALGO unset) or --algo's.\n"
               "  -t, --topo FILE        NCCL-format <system> XML, or a <cluster> of them (default: this machine,\n"
               "                         detected with hwloc)\n"
               "  -H, --hosts N          hosts of that system (default 1; a <cluster> file names its own)\n"
               "  -r, --ranks N          ranks per host on hosts without GPUs (default: one per core)\n"
               "  -c, --coll NAME        allreduce (default), allgather, reducescatter, broadcast, reduce, alltoall\n"
               "  -a, --algo NAME        the table shows this algorithm (%s)\n"
               "  -b, --minbytes SIZE    smallest size, as nccl-tests counts it (default 8; K/M/G suffixes)\n"
               "  -e, --maxbytes SIZE    largest size (default 128M)\n"
               "  -f, --stepfactor X     multiply sizes by X (default 2)\n"
               "  -d, --datatype TYPE    int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 (default float)\n"
               "  -m, --model SPEC       the machine's speeds, as a job logs them (LOOM_DEBUG=INFO\n"
               "                         LOOM_DEBUG_SUBSYS=ALGO: 'loom-sim --model step=...,net=...'); NIC ports then\n"
               "                         carry at most its net= speed.  Default: typical GPU figures for GPU ranks,\n"
               "                         the cost model's constants for CPU ranks\n"
               "  -v, --verbose          per size, every algorithm: its time in parts (latency, memory, links), its\n"
               "                         traffic and its three busiest links with their utilisation\n"
               "  -h, --help             this text\n"
               "The network between hosts is taken as non-blocking.  Environment: LOOM_NET, LOOM_IB_HCA and\n"
               "LOOM_SOCKET_IFNAME (the NICs ranks use), LOOM_NCHANNELS, LOOM_SHM_SLOT_SIZE, LOOM_NET_SLOT_SIZE and\n"
               "LOOM_CHUNK_SIZE (the pipelining step), as the library reads them (see loom-info).\n",
               loom::algoNames().c_str());
}

int fail(const char* what) {
  std::fprintf(stderr, "loom-sim: %s: %s\n", what, loomGetLastError(nullptr));
  return 1;
}

struct CollInfo {
  const char* name;
  loom::CollType coll;
  bool perRankSize;  // the table's size is n x the call's count (allgather, reducescatter, alltoall)
  double (*busFactor)(int n);
  bool usesOp, hasRoot;
};

double factorAllReduce(int n) { return 2.0 * (n - 1) / n; }
double factorAllToAll(int n) { return static_cast<double>(n - 1) / n; }
double factorOne(int) { return 1.0; }

const CollInfo kColls[] = {
    {"allreduce", loom::CollType::AllReduce, false, factorAllReduce, true, false},
    {"allgather", loom::CollType::AllGather, true, factorAllToAll, false, false},
    {"reducescatter", loom::CollType::ReduceScatter, true, factorAllToAll, true, false},
    {"broadcast", loom::CollType::Broadcast, false, factorOne, false, true},
    {"reduce", loom::CollType::Reduce, false, factorOne, true, true},
    {"alltoall", loom::CollType::AllToAll, true, factorAllToAll, false, false},
};

bool parseSize(const char* s, size_t* out) {
  int64_t v = 0;
  std::string why;
  if (!loom::parseParamValue(loom::ParamType::Size, s, &v, &why) || v <= 0) return false;
  *out = static_cast<size_t>(v);
  return true;
}

std::string timeText(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string topo, algoName, modelSpec;
  int hosts = 1, ranks = 0;
  size_t minBytes = 8, maxBytes = 128u << 20;
  double factor = 2;
  bool verbose = false;
  const CollInfo* coll = &kColls[0];
  loomDataType_t type = loomFloat32;
  static const option opts[] = {
      {"topo", required_argument, nullptr, 't'},      {"hosts", required_argument, nullptr, 'H'},
      {"ranks", required_argument, nullptr, 'r'},     {"coll", required_argument, nullptr, 'c'},
      {"algo", required_argument, nullptr, 'a'},      {"minbytes", required_argument, nullptr, 'b'},
      {"maxbytes", required_argument, nullptr, 'e'},  {"stepfactor", required_argument, nullptr, 'f'},
      {"datatype", required_argument, nullptr, 'd'},  {"model", required_argument, nullptr, 'm'},
      {"verbose", no_argument, nullptr, 'v'},         {"help", no_argument, nullptr, 'h'},
      {}};

  for (int c; (c = getopt_long(argc, argv, "t:H:r:c:a:b:e:f:d:m:vh", opts, nullptr)) != -1;) {
    switch (c) {
      case 't': topo = optarg; break;
      case 'H': hosts = loom::tools::wholeNumber("loom-sim", optarg, "--hosts", 1 << 17); break;
      case 'r': ranks = loom::tools::wholeNumber("loom-sim", optarg, "--ranks", 4096); break;
      case 'c': {
        coll = nullptr;
        for (const CollInfo& ci : kColls)
          if (strcasecmp(optarg, ci.name) == 0) coll = &ci;
        if (coll == nullptr) {
          std::fprintf(stderr, "loom-sim: --coll %s: not one of allreduce, allgather, reducescatter, broadcast, "
                               "reduce, alltoall\n", optarg);
          return 2;
        }
        break;
      }
      case 'a': algoName = optarg; break;
      case 'b':
      case 'e':
        if (!parseSize(optarg, c == 'b' ? &minBytes : &maxBytes)) {
          std::fprintf(stderr, "loom-sim: %s wants a size in bytes (e.g. 8, 256K, 1G), not '%s'\n",
                       c == 'b' ? "--minbytes" : "--maxbytes", optarg);
          return 2;
        }
        break;
      case 'f': {
        char* end = nullptr;
        factor = std::strtod(optarg, &end);
        if (*optarg == '\0' || *end != '\0' || !(factor > 1) || factor > 1e6) {
          std::fprintf(stderr, "loom-sim: --stepfactor must be a number above 1, not '%s'\n", optarg);
          return 2;
        }
        break;
      }
      case 'd': {
        bool found = false;
        for (int t = 0; t < loomNumTypes; ++t)
          if (strcasecmp(optarg, loom::typeName(static_cast<loomDataType_t>(t))) == 0)
            type = static_cast<loomDataType_t>(t), found = true;
        if (!found) {
          std::fprintf(stderr, "loom-sim: --datatype %s: unknown (see --help)\n", optarg);
          return 2;
        }
        break;
      }
      case 'm': modelSpec = optarg; break;
      case 'v': verbose = true; break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "loom-sim: unexpected argument '%s'\n", argv[optind]);
    return 2;
  }
  if (minBytes > maxBytes) {
    std::fprintf(stderr, "loom-sim: --minbytes %zu is above --maxbytes %zu\n", minBytes, maxBytes);
    return 2;
  }
  int forced = -1;
  if (!algoName.empty()) {
    for (int i = 0; i < loom::kNumAlgos; ++i)
      if (strcasecmp(algoName.c_str(), loom::algoName(static_cast<loom::Algo>(i))) == 0) forced = i;
    if (forced < 0) {
      std::fprintf(stderr, "loom-sim: --algo %s: unknown (known: %s)\n", algoName.c_str(), loom::algoNames().c_str());
      return 2;
    }
  }
  if (loom::paramsCheck() != loomSuccess) return fail("environment");
  loom::TopoPolicy policy;
  if (loom::TopoPolicy::fromParams(&policy) != loomSuccess) return fail("environment");

  const auto start = std::chrono::steady_clock::now();
  loom::tools::PlannedCluster planned;
  if (loom::tools::planCluster("loom-sim", topo, hosts, ranks, policy, &planned) != 0) return 1;
  const auto& systems = planned.systems;
  const loom::Cluster& cluster = planned.cluster;
  const loom::RoutePlan& plan = planned.plan;
  loom::SimMachine machine = loom::defaultMachine(cluster);
  if (!modelSpec.empty()) {
    std::string why;
    if (!loom::CostModel::parseSpec(modelSpec, &machine.model, &why)) {
      std::fprintf(stderr, "loom-sim: --model: %s\n", why.c_str());
      return 2;
    }
    machine.capNet = modelSpec.find("net=") != std::string::npos;
    // A model from before the duplex probe: both ways at the one-way speed, as it priced them.
    if (machine.capNet && modelSpec.find("netduplex=") == std::string::npos)
      machine.model.netDuplexGBs = machine.model.netGBs;
    // One from before the whole-message probe: those at the exchange speed, as it priced them.
    if (machine.capNet && modelSpec.find("netdirect=") == std::string::npos)
      machine.model.netDirectGBs = machine.model.netDuplexGBs;
    machine.source = "--model " + modelSpec;
  }
  const int n = cluster.nranks(), usedHosts = static_cast<int>(systems.size());
  std::printf("# loom-sim: %s of %d ranks on %d host(s) (%s), %zu ring(s): %s\n", coll->name, n, usedHosts,
              topo.empty() ? "this machine" : topo.c_str(), plan.rings.size(), plan.rings[0].reason.c_str());
  std::printf("# machine: %s\n#  %s\n", machine.source.c_str(), machine.model.describe().c_str());
  std::printf("#\n#%72s%35s\n", "out-of-place", "in-place");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop",
              "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  const size_t es = loom::typeSize(type);
  std::string details;
  for (double b = static_cast<double>(minBytes); b <= static_cast<double>(maxBytes) * (1 + 1e-9); b *= factor) {
    // Whole elements, and for the per-rank collectives whole elements per rank, as the perf tools round.
    const size_t unit = es * (coll->perRankSize ? static_cast<size_t>(n) : 1);
    const size_t size = static_cast<size_t>(b) / unit * unit;
    const size_t callBytes = coll->perRankSize ? size / static_cast<size_t>(n) : size;
    const std::vector<loom::SimEstimate> est = loom::simulate(cluster, plan, machine, coll->coll, callBytes);
    const loom::SimEstimate* shown = nullptr;
    for (const loom::SimEstimate& e : est)
      if (forced >= 0 ? static_cast<int>(e.algo) == forced : e.chosen) shown = &e;
    if (shown == nullptr) {
      std::fprintf(stderr, "loom-sim: %s has no algorithm %s here (it has:", coll->name, algoName.c_str());
      for (const loom::SimEstimate& e : est) std::fprintf(stderr, " %s", loom::algoName(e.algo));
      std::fprintf(stderr, ")\n");
      return 2;
    }
    const double us = std::max(shown->us, 1e-3);
    const double algbw = static_cast<double>(size) / us / 1e3, busbw = algbw * coll->busFactor(n);
    char cols[160];
    std::snprintf(cols, sizeof cols, "  %7s  %6.2f  %6.2f  %6s", timeText(us).c_str(), algbw, busbw, "N/A");
    std::printf("%12zu  %12zu  %8s  %6s  %6d%s%s\n", size, size / es, loom::typeName(type),
                coll->usesOp ? "sum" : "none", coll->hasRoot ? 0 : -1, cols,
                cols);
    char line[400];
    const loom::LinkUse* top = shown->busiest.empty() ? nullptr : &shown->busiest.front();
    std::snprintf(line, sizeof line, "# %12zu  %-8s %s%s\n", size, loom::algoName(shown->algo),
                  top ? (top->name + " " + std::to_string(static_cast<int>(100 * top->busyUs / us + 0.5)) + "% busy")
                            .c_str()
                      : "no link between devices (memory and hand-overs only)",
                  est.front().algo != shown->algo
                      ? (std::string(", fastest on paper: ") + loom::algoName(est.front().algo)).c_str()
                      : "");
    details += line;
    if (verbose)
      for (const loom::SimEstimate& e : est) {
        std::snprintf(line, sizeof line, "#     %-8s %10.1f us: latency %.1f, memory %.1f, links %.1f (selector: %.1f)%s; %s\n",
                      loom::algoName(e.algo), e.us, e.latencyUs, e.memoryUs, e.linkUs, e.selectorUs,
                      e.chosen ? " <- loom's choice" : "", e.pattern.c_str());
        details += line;
        for (const loom::LinkUse& l : e.busiest) {
          std::snprintf(line, sizeof line, "#         %-40s %8.2f GB/s  %6.3f S  %5.1f%% busy\n", l.name.c_str(), l.gbs,
                        l.units, 100 * l.busyUs / std::max(e.us, 1e-9));
          details += line;
        }
      }
  }
  std::printf("#\n# per size: the algorithm, the busiest link and the share of the call it is busy\n%s",
              details.c_str());
  std::printf("# simulated in %.2f s (placement, routes and every size)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}
