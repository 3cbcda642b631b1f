#include "transport/registry.h"

#include <string>

#include "base/error.h"
#include "base/params.h"

#include "transport/p2p/p2p_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/socket/socket_transport.h"
#include "loom_build_config.h"
#if LOOM_HAVE_UCX
#include "transport/ucx/ucx_transport.h"
#endif
#if LOOM_HAVE_VERBS
#include "transport/ib/ib_transport.h"
#endif

namespace loom {

std::atomic<uint64_t>& slotCopyBytes() {
  static std::atomic<uint64_t> bytes{0};
  return bytes;
}

const std::vector<Transport*>& transports() {
  // Never destroyed (a rank may still be tearing down at static destruction), and so still reachable.
  static const std::vector<Transport*>& all = *[] {
    auto* v = new std::vector<Transport*>();
    v->push_back(new ShmTransport());
#if LOOM_HAVE_VERBS
    v->push_back(new IbTransport());
#endif
    v->push_back(new SocketTransport());
#if LOOM_HAVE_UCX
    v->push_back(new UcxTransport());
#endif
    v->push_back(new P2pTransport());  // one-sided: the device path's (device/p2p_call.h), not a queue
    return v;
  }();
  return all;
}

loomResult_t checkNetChoice() {
  const std::string& want = params().NET;
  if (want.empty()) return loomSuccess;
  std::string have;
  for (const Transport* t : transports()) {
    if (t->caps().link != LinkKind::kNetwork) continue;
    if (want == t->name()) return loomSuccess;
    have += (have.empty() ? "" : ", ") + std::string(t->name());
  }
  return setError(loomInvalidArgument, "LOOM_NET=%s is not a network transport of this build (it has: %s)",
                  want.c_str(), have.c_str());
}

}  // namespace loom
