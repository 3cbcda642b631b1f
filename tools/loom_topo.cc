// loom-topo: the machine as loom models it, the paths between its devices, and the decisions loom takes
// over it (transport per rank pair, NIC per rank, GPUDirect RDMA, rings and trees), each with its reason.
#include <getopt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "base/params.h"
#include "loom.h"
#include "sim/simulate.h"
#include "topo/cluster.h"
#include "topo/decisions.h"
#include "topo/detect.h"
#include "topo/render.h"
#include "topo/routes.h"
#include "tool_cluster.h"
#include "topo/xml.h"

namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "usage: loom-topo [options]\n"
               "Prints the system loom sees (detected with hwloc and sysfs, or loaded), the path matrix between\n"
               "its GPUs, NICs and CPUs, and the transports, NICs, GPUDirect RDMA choices, rings and trees it\n"
               "would use, each with its reason.\n"
               "  -t, --topo FILE     load FILE (NCCL-format <system> XML, or a <cluster> of them) instead of\n"
               "                      detecting this machine (LOOM_TOPO_FILE is merged with detection instead)\n"
               "  -H, --hosts N       plan for N hosts of that system (default 1)\n"
               "  -r, --ranks N       ranks per host on a host without GPUs (default: one per core)\n"
               "  -d, --dot FILE      write the topology with ring 0 drawn on it as Graphviz\n"
               "  -p, --png FILE      render that picture to a PNG (needs Graphviz's dot)\n"
               "  -x, --dump FILE     write the system as NCCL-format XML\n"
               "  -q, --quiet         only the plan (no tree, no path matrix)\n"
               "  -P, --plan SIZE     also estimate an allreduce of SIZE bytes per rank (K/M/G suffixes) with\n"
               "                      each algorithm on paper (loom-sim's model: more sizes and collectives there)\n"
               "  -h, --help          this text\n"
               "Environment: LOOM_P2P_LEVEL, LOOM_NET_GDR_LEVEL, LOOM_TOPO_FILE, and for the NIC choice LOOM_NET,\n"
               "LOOM_IB_HCA and LOOM_SOCKET_IFNAME (see loom-info).\n");
}

int fail(const char* what) {
  std::fprintf(stderr, "loom-topo: %s: %s\n", what, loomGetLastError(nullptr));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string topo, dot, png, dump;
  int hosts = 1, ranks = 0;
  bool quiet = false;
  double planBytes = 0;
  static const option opts[] = {{"topo", required_argument, nullptr, 't'}, {"hosts", required_argument, nullptr, 'H'},
                                {"ranks", required_argument, nullptr, 'r'}, {"dot", required_argument, nullptr, 'd'},
                                {"png", required_argument, nullptr, 'p'},   {"dump", required_argument, nullptr, 'x'},
                                {"quiet", no_argument, nullptr, 'q'},       {"help", no_argument, nullptr, 'h'},
                                {"plan", required_argument, nullptr, 'P'},
                                {}};

  for (int c; (c = getopt_long(argc, argv, "t:H:r:d:p:x:qP:h", opts, nullptr)) != -1;) {
    switch (c) {
      case 't': topo = optarg; break;
      case 'H': hosts = loom::tools::wholeNumber("loom-topo", optarg, "--hosts", 1 << 16); break;
      case 'r': ranks = loom::tools::wholeNumber("loom-topo", optarg, "--ranks", 4096); break;
      case 'd': dot = optarg; break;
      case 'p': png = optarg; break;
      case 'x': dump = optarg; break;
      case 'q': quiet = true; break;
      case 'P': {
        int64_t v = 0;
        std::string why;
        if (!loom::parseParamValue(loom::ParamType::Size, optarg, &v, &why) || v <= 0) {
          std::fprintf(stderr, "loom-topo: --plan wants a size in bytes (e.g. 1G, 256K), not '%s'\n", optarg);
          return 2;
        }
        planBytes = static_cast<double>(v);
        break;
      }
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "loom-topo: unexpected argument '%s'\n", argv[optind]);
    return 2;
  }
  if (loom::paramsCheck() != loomSuccess) return fail("environment");
  loom::TopoPolicy policy;
  if (loom::TopoPolicy::fromParams(&policy) != loomSuccess) return fail("environment");

  loom::tools::PlannedCluster planned;
  if (loom::tools::planCluster("loom-topo", topo, hosts, ranks, policy, &planned) != 0) return 1;
  const auto& systems = planned.systems;
  const loom::Cluster& cluster = planned.cluster;
  const loom::RoutePlan& plan = planned.plan;

  if (!quiet) {
    std::printf("%s\n", loom::renderTree(*systems[0]).c_str());
    if (systems.size() > 1) std::printf("(%zu hosts like this)\n\n", systems.size());
    std::printf("paths:\n%s\n", loom::renderPathMatrix(*systems[0]).c_str());
  }
  std::printf("%s", loom::renderPlan(cluster, plan, policy).c_str());

  if (planBytes > 0) {
    std::printf("\nallreduce of %.0f bytes per rank, on paper (%s):\n", planBytes,
                loom::defaultMachine(cluster).source.c_str());
    const auto est = loom::simulate(cluster, plan, loom::defaultMachine(cluster), loom::CollType::AllReduce,
                                    static_cast<size_t>(planBytes));
    for (const auto& e : est)
      std::printf("  %-8s %12.1f us  busbw %8.2f GB/s  (%s; busiest: %s)%s\n", loom::algoName(e.algo), e.us,
                  planBytes * 2 * (cluster.nranks() - 1) / cluster.nranks() / e.us / 1e3, e.pattern.c_str(),
                  e.busiest.empty() ? "none" : e.busiest.front().name.c_str(), e.chosen ? "  <- chosen" : "");
  }
  if (!dump.empty()) {
    std::ofstream f(dump);
    f << loom::xmlWrite(*systems[0]->xml);
    if (!f) return std::fprintf(stderr, "loom-topo: cannot write %s\n", dump.c_str()), 1;
  }
  if (!dot.empty() || !png.empty()) {
    const std::string text = loom::renderDot(cluster, plan);
    std::string dotFile = dot.empty() ? png + ".dot" : dot;
    std::ofstream f(dotFile);
    f << text;
    f.close();
    if (!f) return std::fprintf(stderr, "loom-topo: cannot write %s\n", dotFile.c_str()), 1;
    if (!png.empty()) {
      std::string cmd = "dot -Tpng -o '" + png + "' '" + dotFile + "'";
      if (png.find('\'') != std::string::npos || dotFile.find('\'') != std::string::npos)
        return std::fprintf(stderr, "loom-topo: file names with quotes are not supported\n"), 2;
      int rc = std::system(cmd.c_str());
      if (dot.empty()) std::remove(dotFile.c_str());
      if (rc != 0) return std::fprintf(stderr, "loom-topo: '%s' failed (is Graphviz installed?)\n", cmd.c_str()), 1;
    }
  }
  return 0;
}
