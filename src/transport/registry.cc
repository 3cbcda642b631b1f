#include "transport/registry.h"

#include "transport/shm/shm_transport.h"
#include "transport/socket/socket_transport.h"
#include "loom_build_config.h"
#if LOOM_HAVE_UCX
#include "transport/ucx/ucx_transport.h"
#endif

namespace loom {

const std::vector<Transport*>& transports() {
  static const std::vector<Transport*> all = [] {
    std::vector<Transport*> v;
    v.push_back(new ShmTransport());
    v.push_back(new SocketTransport());
#if LOOM_HAVE_UCX
    v.push_back(new UcxTransport());
#endif
    return v;
  }();
  return all;
}

}  // namespace loom
