#include "transport/ib/device_mr.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>

#include "base/params.h"
#include "device_runtime/device_api.h"

namespace loom {

namespace {

struct CachedRegistration {
  const VerbsApi* api;
  ibv_pd* pd;
  uint64_t id;    // the allocation's buffer id
  uint64_t base;  // its device address
  ibv_mr* mr;
};

std::mutex gMutex;
// Most recently used first; never destroyed (registrations may be used until exit).
std::list<CachedRegistration>* gEntries = new std::list<CachedRegistration>();

// Registers allocation `a`: its dma-buf, else (peer memory) the device address.
ibv_mr* registerAllocation(const VerbsApi& api, DeviceApi* device, ibv_pd* pd, const DeviceApi::Allocation& a,
                           std::string* why) {
  // Remote write as well: on iWARP the sink of an RDMA READ must allow it (the responses are placed
  // like writes); its key never leaves this process, so no peer can use it.
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  int fd = -1;
  uint64_t offset = 0;
  std::string dmabufWhy;
  if (device->dmabufOf(a, &fd, &offset) == loomSuccess) {
    ibv_mr* mr = api.regDmabufMr(pd, offset, a.length, a.base, fd, access);
    dmabufWhy = std::strerror(errno);
    close(fd);  // the registration holds its own reference to the dma-buf
    if (mr != nullptr) return mr;
  } else {
    dmabufWhy = "not exported: " + device->lastErrorText();
  }
  ibv_mr* mr = api.regMr(pd, reinterpret_cast<void*>(a.base), a.length, access);
  if (mr == nullptr)
    *why = "the RDMA device registers neither the GPU buffer's dma-buf (" + dmabufWhy + ") nor its address (" +
           std::strerror(errno) + "; GPUDirect RDMA needs dma-buf support or the nvidia-peermem module)";
  return mr;
}

// Registrations of allocations the application freed (the address no longer belongs to the allocation
// registered) pin memory nobody can use: they go before a new registration is made.  A lookup per entry
// costs far less than the registration that follows it.  Called with gMutex held.
void dropFreedAllocations(DeviceApi* device) {
  for (auto it = gEntries->begin(); it != gEntries->end();) {
    DeviceApi::Allocation now;
    const bool live = device->allocationOf(reinterpret_cast<const void*>(it->base), &now) == loomSuccess &&
                      now.id == it->id && now.base == it->base;
    if (live) {
      ++it;
      continue;
    }
    it->api->deregMr(it->mr);
    it = gEntries->erase(it);
  }
}

}  // namespace

ibv_mr* deviceRegistration(const VerbsApi& api, DeviceApi* device, ibv_pd* pd, const void* ptr, size_t bytes,
                           std::string* why) {
  if (device == nullptr || !device->isDeviceMemory(ptr)) return *why = "not device memory", nullptr;
  DeviceApi::Allocation a;
  if (device->allocationOf(ptr, &a) != loomSuccess)
    return *why = "cannot find the GPU buffer's allocation (" + device->lastErrorText() + ")", nullptr;
  const auto at = reinterpret_cast<uint64_t>(ptr);
  if (at < a.base || at + bytes > a.base + a.length)
    return *why = "the buffer runs past the end of its GPU allocation", nullptr;
  std::lock_guard<std::mutex> lock(gMutex);
  for (auto it = gEntries->begin(); it != gEntries->end(); ++it) {
    if (it->api == &api && it->pd == pd && it->id == a.id && it->base == a.base) {
      gEntries->splice(gEntries->begin(), *gEntries, it);
      return it->mr;
    }
  }
  dropFreedAllocations(device);
  ibv_mr* mr = registerAllocation(api, device, pd, a, why);
  if (mr == nullptr) return nullptr;
  gEntries->push_front(CachedRegistration{&api, pd, a.id, a.base, mr});
  // Over the bound: the least recently used go (not this call's: it was used last).
  const size_t keep = static_cast<size_t>(params().IB_GDR_CACHE);  // at least 1 (base/params.h)
  while (gEntries->size() > keep) {
    gEntries->back().api->deregMr(gEntries->back().mr);
    gEntries->pop_back();
  }
  return mr;
}

}  // namespace loom
