#include "transport/ib/ib_device.h"

#include <map>
#include <mutex>

#include "base/log.h"
#include "base/params.h"
#include "base/socket.h"

namespace loom {

const IbDevice& ibDevice() {
  static std::mutex mu;
  // Open for the life of the process (never destroyed, so still reachable at exit: no leak reports).
  static auto* cache = new std::map<const VerbsApi*, IbDevice>();
  static IbDevice* noLibrary = new IbDevice();
  std::lock_guard<std::mutex> g(mu);
  std::string why;
  const VerbsApi* loaded = verbsApi(&why);
  if (loaded == nullptr) {
    noLibrary->error = why;  // the same every time: rdma-core is loaded once or never
    return *noLibrary;
  }
  const VerbsApi& api = *loaded;
  auto it = cache->find(&api);
  if (it != cache->end()) return it->second;
  IbDevice& d = (*cache)[&api];
  d.api = &api;
  int n = 0;
  ibv_device** list = api.getDeviceList(&n);
  if (list == nullptr || n == 0) {
    d.error = "no RDMA device";
    if (list != nullptr) api.freeDeviceList(list);
    return d;
  }
  const std::string& spec = params().IB_HCA;
  for (int i = 0; i < n && d.context == nullptr; ++i) {
    const std::string name = list[i]->name;
    if (!spec.empty() && !interfaceMatches(spec, name)) continue;
    ibv_context* c = api.openDevice(list[i]);
    if (c == nullptr) continue;
    ibv_device_attr da{};
    if (api.queryDevice(c, &da) != 0) da.phys_port_cnt = 1;
    for (uint8_t p = 1; p <= da.phys_port_cnt; ++p) {
      ibv_port_attr pa{};
      if (api.queryPort(c, p, &pa) != 0 || pa.state != IBV_PORT_ACTIVE) continue;
      d.context = c;
      d.port = p;
      d.portAttr = pa;
      d.name = name + ":" + std::to_string(p);
      d.iwarp = list[i]->transport_type == IBV_TRANSPORT_IWARP;
      break;
    }
    if (d.context == nullptr) api.closeDevice(c);
  }
  api.freeDeviceList(list);
  if (d.context == nullptr) {
    d.error = spec.empty() ? "no active RDMA port" : "no active RDMA port on a device matching LOOM_IB_HCA=" + spec;
    return d;
  }
  // GIDs: RoCE and iWARP address by GID; RoCE prefers a v2 entry (routable), LOOM_IB_GID_INDEX overrides.
  if (d.portAttr.link_layer == IBV_LINK_LAYER_ETHERNET || d.iwarp) {
    int chosen = static_cast<int>(params().IB_GID_INDEX);
    for (int i = 0; chosen < 0 && i < d.portAttr.gid_tbl_len; ++i) {
      ibv_gid entry{};
      if (api.queryGid(d.context, d.port, i, &entry) != 0 || (entry.global.subnet_prefix == 0 && entry.global.interface_id == 0))
        continue;
      if (api.gidType(d.context, d.port, i) == 2) chosen = i;
    }
    if (chosen < 0) chosen = 0;
    d.gidIndex = chosen;
    api.queryGid(d.context, d.port, chosen, &d.gid);
  }
  d.pd = api.allocPd(d.context);
  if (d.pd == nullptr) {
    d.error = "cannot allocate a protection domain on " + d.name;
    d.context = nullptr;
  }
  return d;
}

bool usesRdmaCm(const IbDevice& d) { return params().IB_CM == 1 || (params().IB_CM < 0 && d.iwarp); }

ibv_pd* protectionDomainOf(const VerbsApi& api, ibv_context* context) {
  static std::mutex mu;
  static auto* pds = new std::map<std::pair<const VerbsApi*, ibv_context*>, ibv_pd*>();
  std::lock_guard<std::mutex> g(mu);
  ibv_pd*& pd = (*pds)[{&api, context}];
  if (pd == nullptr) pd = api.allocPd(context);
  return pd;
}

}  // namespace loom
