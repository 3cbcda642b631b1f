// loom-info: what this build of loom has and every LOOM_* environment parameter it reads.
#include <getopt.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "model/cost_model.h"
#include "kernels/reduce_kernels.h"
#include "device_runtime/device_api.h"
#include "base/params.h"
#include "transport/registry.h"
#include "loom.h"
#include "loom_build_config.h"

namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "usage: loom-info [--env] [--help]\n"
               "Prints the loom version, the optional parts this build has, the reduction kernels this CPU\n"
               "uses, and every LOOM_* environment parameter with its default, current value and meaning.\n"
               "  -e, --env   only the environment parameters, one per line: NAME=value (default) # help\n"
               "  -h, --help  this text\n");
}

const char* typeWord(loom::ParamType t) {
  return t == loom::ParamType::Int ? "int" : t == loom::ParamType::Size ? "size" : "string";
}

}  // namespace

int main(int argc, char** argv) {
  bool envOnly = false;
  static const option opts[] = {{"env", no_argument, nullptr, 'e'}, {"help", no_argument, nullptr, 'h'}, {}};
  for (int c; (c = getopt_long(argc, argv, "eh", opts, nullptr)) != -1;) {
    if (c == 'e') envOnly = true;
    else if (c == 'h') return usage(stdout), 0;
    else return usage(stderr), 2;
  }
  int n = 0;
  const loom::ParamSpec* table = loom::paramTable(&n);
  if (envOnly) {
    for (int i = 0; i < n; ++i)
      std::printf("LOOM_%s=%s (default %s) # %s\n", table[i].name, loom::paramEnvText(i).c_str(),
                  table[i].defaultValue, table[i].help);
    return 0;
  }
  int version = 0;
  loomGetVersion(&version);
  std::printf("loom %d.%d.%d (version code %d), %s build\n", version / 10000, version / 100 % 100, version % 100,
              version, LOOM_BUILD_TYPE);
  std::printf("optional parts: cuda %s, ucx %s, verbs %s, hwloc %s, torch %s, nccl api (libloom_nccl) %s\n",
              LOOM_HAVE_CUDA ? "yes" : "no", LOOM_HAVE_UCX ? "yes" : "no", LOOM_HAVE_VERBS ? "yes" : "no",
              LOOM_HAVE_HWLOC ? "yes" : "no", LOOM_HAVE_TORCH ? "yes" : "no", LOOM_HAVE_NCCL_API ? "yes" : "no");
  std::printf("transports (what each declares, transport.h TransportCaps):\n");
  for (const loom::Transport* t : loom::transports()) {
    const loom::TransportCaps c = t->caps();
    const bool host = c.memory & loom::kHostMemory, device = c.memory & loom::kDeviceMemory;
    std::printf("  %-7s %s link; %s memory; %s%s\n", t->name(), loom::linkKindName(c.link),
                host && device ? "host and device" : device ? "device" : "host",
                c.queues ? "queues" : "maps peers' buffers per call", c.zeroCopy ? ", zero copy" : "");
  }
  std::printf("reduction kernels on this CPU: %s\n", loom::reduceKernels().isa);
  std::printf("algorithms (LOOM_ALGO): %s\n", loom::algoNames().c_str());
  {
    std::string why;
    loom::DeviceApi* dev = loom::cudaDeviceApi(&why);
    std::printf("device buffers and CUDA streams: %s (%s)\n", dev != nullptr ? "yes" : "no", why.c_str());
  }
  if (loom::paramsCheck() != loomSuccess) std::printf("WARNING: %s\n", loomGetLastError(nullptr));
  std::printf("\nenvironment parameters:\n");
  for (int i = 0; i < n; ++i) {
    std::printf("  LOOM_%-16s %-6s default %-8s now %s%s%s\n      %s\n", table[i].name, typeWord(table[i].type),
                *table[i].defaultValue ? table[i].defaultValue : "\"\"", loom::paramEnvText(i).c_str(),
                *table[i].range ? "  range " : "", table[i].range, table[i].help);
  }
  return 0;
}
