#include "transport/ib/mr_cache.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "base/params.h"

namespace loom {

namespace {

struct Idle {
  const VerbsApi* api;
  RegisteredBuffer buffer;
};

struct Cache {
  std::mutex mu;
  std::deque<Idle> idle;  // oldest first
  MrCacheStats stats;
};

Cache& cache() {
  static auto* c = new Cache();  // never destroyed: idle buffers stay reachable at exit
  return *c;
}

void destroy(const VerbsApi& api, RegisteredBuffer* b) {
  if (b->mr != nullptr) api.deregMr(b->mr);
  std::free(b->data);
  *b = RegisteredBuffer{};
}

}  // namespace

bool acquireRegistered(const VerbsApi& api, ibv_pd* pd, size_t bytes, int access, RegisteredBuffer* out) {
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> g(c.mu);
    for (auto it = c.idle.begin(); it != c.idle.end(); ++it) {
      const RegisteredBuffer& b = it->buffer;
      if (it->api == &api && b.pd == pd && b.bytes == bytes && b.access == access) {
        *out = b;
        c.idle.erase(it);
        c.stats.idleBytes -= bytes;
        ++c.stats.reuses;
        std::memset(out->data, 0, bytes);
        return true;
      }
    }
  }
  RegisteredBuffer b;
  const size_t rounded = (bytes + 4095) / 4096 * 4096;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, rounded == 0 ? 4096 : rounded) != 0) return errno = ENOMEM, false;
  std::memset(p, 0, rounded == 0 ? 4096 : rounded);
  b.data = static_cast<char*>(p);
  b.bytes = bytes;
  b.pd = pd;
  b.access = access;
  b.mr = api.regMr(pd, b.data, bytes, access);
  if (b.mr == nullptr) {
    const int e = errno;
    std::free(b.data);
    errno = e;
    return false;
  }
  {
    std::lock_guard<std::mutex> g(c.mu);
    ++c.stats.registrations;
  }
  *out = b;
  return true;
}

void releaseRegistered(const VerbsApi& api, RegisteredBuffer* b) {
  if (b->data == nullptr) return;
  const size_t bound = static_cast<size_t>(params().IB_MR_CACHE);
  std::deque<Idle> evicted;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> g(c.mu);
    if (b->bytes <= bound) {
      c.idle.push_back({&api, *b});
      c.stats.idleBytes += b->bytes;
      *b = RegisteredBuffer{};
    }
    while (c.stats.idleBytes > bound && !c.idle.empty()) {
      evicted.push_back(c.idle.front());
      c.stats.idleBytes -= c.idle.front().buffer.bytes;
      c.idle.pop_front();
    }
  }
  for (Idle& e : evicted) destroy(*e.api, &e.buffer);
  if (b->data != nullptr) destroy(api, b);  // larger than the whole bound
}

MrCacheStats mrCacheStats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> g(c.mu);
  return c.stats;
}

}  // namespace loom
