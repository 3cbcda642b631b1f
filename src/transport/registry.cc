#include "transport/registry.h"

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

const std::vector<Transport*>& transports() {
  static const std::vector<Transport*> all = [] {
    std::vector<Transport*> v;
    v.push_back(new ShmTransport());
#if LOOM_HAVE_VERBS
    v.push_back(new IbTransport());
#endif
    v.push_back(new SocketTransport());
#if LOOM_HAVE_UCX
    v.push_back(new UcxTransport());
#endif
    return v;
  }();
  return all;
}

}  // namespace loom
