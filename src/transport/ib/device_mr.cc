#include "transport/ib/device_mr.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>

#include "core/params.h"
#include "device/device_api.h"

namespace loom {

namespace {

struct Entry {
  const VerbsApi* api;
  ibv_pd* pd;
  uint64_t id;     // the allocation's buffer id
  uint64_t base;   // its device address and length
  size_t length;
  ibv_mr* mr;
};

std::mutex gMutex;
std::list<Entry>* gEntries = new std::list<Entry>();  // most recently used first; never destroyed (exit)

// Registers the allocation described by d: its dma-buf, else (peer memory) the device address.
ibv_mr* registerAllocation(const VerbsApi& api, ibv_pd* pd, const DeviceApi::Dmabuf& d, std::string* why) {
  // Remote write as well: on iWARP the sink of an RDMA READ must allow it (the responses are placed
  // like writes); its key never leaves this process, so no peer can use it.
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  ibv_mr* mr = api.regDmabufMr(pd, d.offset, d.length, d.base, d.fd, access);
  if (mr != nullptr) return mr;
  const std::string dmabufWhy = std::strerror(errno);
  mr = api.regMr(pd, reinterpret_cast<void*>(d.base), d.length, access);
  if (mr == nullptr)
    *why = "the RDMA device registers neither the GPU buffer's dma-buf (" + dmabufWhy + ") nor its address (" +
           std::strerror(errno) + "; GPUDirect RDMA needs dma-buf support or the nvidia-peermem module)";
  return mr;
}

}  // namespace

ibv_mr* deviceRegistration(const VerbsApi& api, DeviceApi* device, ibv_pd* pd, const void* ptr, size_t bytes,
                           std::string* why) {
  if (device == nullptr || !device->isDeviceMemory(ptr)) return *why = "not device memory", nullptr;
  DeviceApi::Dmabuf d;
  if (device->dmabufOf(ptr, &d) != loomSuccess)
    return *why = "cannot export the GPU buffer (" + device->lastErrorText() + ")", nullptr;
  const auto at = reinterpret_cast<uint64_t>(ptr);
  if (at < d.base || at + bytes > d.base + d.length) {
    close(d.fd);
    return *why = "the buffer runs past the end of its GPU allocation", nullptr;
  }
  std::lock_guard<std::mutex> lock(gMutex);
  for (auto it = gEntries->begin(); it != gEntries->end(); ++it) {
    if (it->api == &api && it->pd == pd && it->id == d.id && it->base == d.base) {
      close(d.fd);
      gEntries->splice(gEntries->begin(), *gEntries, it);
      return it->mr;
    }
  }
  ibv_mr* mr = registerAllocation(api, pd, d, why);
  close(d.fd);  // the registration holds its own reference to the dma-buf
  if (mr == nullptr) return nullptr;
  gEntries->push_front(Entry{&api, pd, d.id, d.base, d.length, mr});
  // Over the bound: the least recently used go (not this call's: it was used last).
  const size_t keep = static_cast<size_t>(std::max<int64_t>(1, params().IB_GDR_CACHE));
  while (gEntries->size() > keep) {
    gEntries->back().api->deregMr(gEntries->back().mr);
    gEntries->pop_back();
  }
  return mr;
}

void deviceRegistrationsDropAll(const VerbsApi& api) {
  std::lock_guard<std::mutex> lock(gMutex);
  for (auto it = gEntries->begin(); it != gEntries->end();) {
    if (it->api != &api) {
      ++it;
      continue;
    }
    api.deregMr(it->mr);
    it = gEntries->erase(it);
  }
}

}  // namespace loom
