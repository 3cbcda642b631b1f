#include "transport/ib/host_mr.h"

#include <cerrno>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "base/log.h"
#include "base/params.h"

namespace loom {

namespace {

constexpr uint32_t kNeededRc = IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ;
constexpr uint64_t kNeededGeneral = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;

std::mutex gHostRegionsMutex;
// Per (table, protection domain): the implicit region; never deregistered (in use until exit, like the
// protection domains of transport/ib/ib_device.h).
using RegionMap = std::map<std::pair<const VerbsApi*, ibv_pd*>, ibv_mr*>;
RegionMap* gHostRegions = new RegionMap();

}  // namespace

bool hostZeroCopy(const VerbsApi& api, ibv_context* context) {
  if (params().IB_ODP == 0 || context == nullptr || api.odpCaps == nullptr) return false;
  uint64_t general = 0;
  uint32_t rc = 0;
  // iWARP places RDMA READ responses like writes: the sink would have to allow remote writes to the
  // whole address space (below).  No iWARP device has implicit paging anyway.
  if (context->device != nullptr && context->device->transport_type == IBV_TRANSPORT_IWARP) return false;
  if (api.odpCaps(context, &general, &rc) != 0) return false;
  return (general & kNeededGeneral) == kNeededGeneral && (rc & kNeededRc) == kNeededRc;
}

const ibv_mr* hostRegion(const VerbsApi& api, ibv_context* context, ibv_pd* pd) {
  if (!hostZeroCopy(api, context)) return nullptr;
  std::lock_guard<std::mutex> lock(gHostRegionsMutex);
  auto it = gHostRegions->find({&api, pd});
  if (it != gHostRegions->end()) return it->second;
  // Remote read, never remote write: the key travels to peers in direct frames, so an authenticated peer
  // of this job could read any of this process's memory with it (LOOM_IB_ODP=0 where that matters), but
  // never change it.
  const int access = IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  ibv_mr* mr = api.regMr(pd, nullptr, SIZE_MAX, access);
  if (mr == nullptr) {
    LOOM_INFO(kNet, "ib: the implicit on-demand paging region was refused (%s): callers' buffers go through the slots",
              strerror(errno));
    return nullptr;
  }
  (*gHostRegions)[{&api, pd}] = mr;
  return mr;
}

}  // namespace loom
