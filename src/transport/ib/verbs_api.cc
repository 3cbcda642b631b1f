#include "transport/ib/verbs_api.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "base/dynlib.h"

namespace loom {

namespace {

// rdma-core, opened when the ib transport is first asked for a device (base/dynlib.h says why not linked).
struct RdmaCore {
  decltype(&::ibv_get_device_list) getDeviceList;
  decltype(&::ibv_free_device_list) freeDeviceList;
  decltype(&::ibv_get_device_name) getDeviceName;
  decltype(&::ibv_open_device) openDevice;
  decltype(&::ibv_close_device) closeDevice;
  decltype(&::ibv_query_device) queryDevice;
  decltype(&::ibv_query_port) queryPort;  // the exported function behind verbs.h's macro (see below)
  decltype(&::ibv_query_gid) queryGid;
  decltype(&::ibv_alloc_pd) allocPd;
  decltype(&::ibv_dealloc_pd) deallocPd;
  decltype(&::ibv_reg_mr) regMr;  // likewise
  decltype(&::ibv_reg_dmabuf_mr) regDmabufMr;
  decltype(&::ibv_dereg_mr) deregMr;
  decltype(&::ibv_create_cq) createCq;
  decltype(&::ibv_destroy_cq) destroyCq;
  decltype(&::ibv_create_qp) createQp;
  decltype(&::ibv_modify_qp) modifyQp;
  decltype(&::ibv_destroy_qp) destroyQp;
  decltype(&::ibv_wc_status_str) wcStatusStr;
  decltype(&::rdma_create_event_channel) createEventChannel;
  decltype(&::rdma_destroy_event_channel) destroyEventChannel;
  decltype(&::rdma_create_id) createId;
  decltype(&::rdma_destroy_id) destroyId;
  decltype(&::rdma_bind_addr) bindAddr;
  decltype(&::rdma_listen) listen;
  decltype(&::rdma_get_src_port) srcPort;
  decltype(&::rdma_resolve_addr) resolveAddr;
  decltype(&::rdma_resolve_route) resolveRoute;
  decltype(&::rdma_create_qp) cmCreateQp;
  decltype(&::rdma_destroy_qp) cmDestroyQp;
  decltype(&::rdma_connect) connect;
  decltype(&::rdma_accept) accept;
  decltype(&::rdma_reject) reject;
  decltype(&::rdma_get_cm_event) getEvent;
  decltype(&::rdma_ack_cm_event) ackEvent;
  decltype(&::rdma_event_str) eventStr;
  std::string error;  // empty when every function above is bound
};

const RdmaCore& rdmaCore() {
  static const RdmaCore* lib = [] {
    auto* r = new RdmaCore();  // never freed: the libraries stay loaded
    DynLib verbs, cm;
    if (verbs.open({"libibverbs.so.1", "libibverbs.so"})) {
      verbs.bind("ibv_get_device_list", &r->getDeviceList);
      verbs.bind("ibv_free_device_list", &r->freeDeviceList);
      verbs.bind("ibv_get_device_name", &r->getDeviceName);
      verbs.bind("ibv_open_device", &r->openDevice);
      verbs.bind("ibv_close_device", &r->closeDevice);
      verbs.bind("ibv_query_device", &r->queryDevice);
      verbs.bind("ibv_query_port", &r->queryPort);
      verbs.bind("ibv_query_gid", &r->queryGid);
      verbs.bind("ibv_alloc_pd", &r->allocPd);
      verbs.bind("ibv_dealloc_pd", &r->deallocPd);
      verbs.bind("ibv_reg_mr", &r->regMr);
      verbs.bind("ibv_reg_dmabuf_mr", &r->regDmabufMr);
      verbs.bind("ibv_dereg_mr", &r->deregMr);
      verbs.bind("ibv_create_cq", &r->createCq);
      verbs.bind("ibv_destroy_cq", &r->destroyCq);
      verbs.bind("ibv_create_qp", &r->createQp);
      verbs.bind("ibv_modify_qp", &r->modifyQp);
      verbs.bind("ibv_destroy_qp", &r->destroyQp);
      verbs.bind("ibv_wc_status_str", &r->wcStatusStr);
    }
    if (verbs.ok() && cm.open({"librdmacm.so.1", "librdmacm.so"})) {
      cm.bind("rdma_create_event_channel", &r->createEventChannel);
      cm.bind("rdma_destroy_event_channel", &r->destroyEventChannel);
      cm.bind("rdma_create_id", &r->createId);
      cm.bind("rdma_destroy_id", &r->destroyId);
      cm.bind("rdma_bind_addr", &r->bindAddr);
      cm.bind("rdma_listen", &r->listen);
      cm.bind("rdma_get_src_port", &r->srcPort);
      cm.bind("rdma_resolve_addr", &r->resolveAddr);
      cm.bind("rdma_resolve_route", &r->resolveRoute);
      cm.bind("rdma_create_qp", &r->cmCreateQp);
      cm.bind("rdma_destroy_qp", &r->cmDestroyQp);
      cm.bind("rdma_connect", &r->connect);
      cm.bind("rdma_accept", &r->accept);
      cm.bind("rdma_reject", &r->reject);
      cm.bind("rdma_get_cm_event", &r->getEvent);
      cm.bind("rdma_ack_cm_event", &r->ackEvent);
      cm.bind("rdma_event_str", &r->eventStr);
    }
    if (!verbs.ok()) r->error = verbs.error();
    else if (!cm.ok()) r->error = cm.error();
    if (!r->error.empty()) r->error += " (rdma-core: apt-get install libibverbs1 librdmacm1 ibverbs-providers)";
    return r;
  }();
  return *lib;
}

// RoCE v2 entries say so in sysfs (the verbs API of rdma-core 44 has no portable query for it).
int sysfsGidType(ibv_context* context, uint8_t port, int index) {
  const std::string path = std::string("/sys/class/infiniband/") + rdmaCore().getDeviceName(context->device) +
                           "/ports/" + std::to_string(port) + "/gid_attrs/types/" + std::to_string(index);
  std::ifstream f(path);
  std::string type;
  if (!std::getline(f, type)) return -1;
  return type.find("v2") != std::string::npos ? 2 : 1;
}

const RdmaCmApi kRdmaCm = {
    [] { return rdmaCore().createEventChannel(); },
    [](rdma_event_channel* c) { rdmaCore().destroyEventChannel(c); },
    [](rdma_event_channel* c, rdma_cm_id** id, void* ctx, rdma_port_space ps) { return rdmaCore().createId(c, id, ctx, ps); },
    [](rdma_cm_id* id) { return rdmaCore().destroyId(id); },
    [](rdma_cm_id* id, sockaddr* a) { return rdmaCore().bindAddr(id, a); },
    [](rdma_cm_id* id, int backlog) { return rdmaCore().listen(id, backlog); },
    [](rdma_cm_id* id) { return static_cast<uint16_t>(rdmaCore().srcPort(id)); },
    [](rdma_cm_id* id, sockaddr* src, sockaddr* dst, int ms) { return rdmaCore().resolveAddr(id, src, dst, ms); },
    [](rdma_cm_id* id, int ms) { return rdmaCore().resolveRoute(id, ms); },
    [](rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* a) { return rdmaCore().cmCreateQp(id, pd, a); },
    [](rdma_cm_id* id) { rdmaCore().cmDestroyQp(id); },
    [](rdma_cm_id* id, rdma_conn_param* p) { return rdmaCore().connect(id, p); },
    [](rdma_cm_id* id, rdma_conn_param* p) { return rdmaCore().accept(id, p); },
    [](rdma_cm_id* id, const void* data, uint8_t n) { return rdmaCore().reject(id, data, n); },
    [](rdma_event_channel* c, rdma_cm_event** e) { return rdmaCore().getEvent(c, e); },
    [](rdma_cm_event* e) { return rdmaCore().ackEvent(e); },
    [](rdma_cm_event_type t) { return rdmaCore().eventStr(t); },
};

// ibv_post_send/recv and ibv_poll_cq are inline in verbs.h (they call the provider through the
// context's ops): no symbol of rdma-core's behind them.
const VerbsApi kRdmaCore = {
    "rdma-core",
    [](int* n) { return rdmaCore().getDeviceList(n); },
    [](ibv_device** l) { rdmaCore().freeDeviceList(l); },
    [](ibv_device* d) { return rdmaCore().openDevice(d); },
    [](ibv_context* c) { return rdmaCore().closeDevice(c); },
    [](ibv_context* c, ibv_device_attr* a) { return rdmaCore().queryDevice(c, a); },
    [](ibv_context* c, uint8_t p, ibv_port_attr* a) {
      // What verbs.h's ibv_query_port macro does: the provider's own query where it has one, else the
      // exported function, which fills the older, shorter attribute struct.
      if (verbs_context* v = verbs_get_ctx_op(c, query_port)) return v->query_port(c, p, a, sizeof(*a));
      std::memset(a, 0, sizeof(*a));
      return rdmaCore().queryPort(c, p, reinterpret_cast<_compat_ibv_port_attr*>(a));
    },
    [](ibv_context* c, uint8_t p, int i, ibv_gid* g) { return rdmaCore().queryGid(c, p, i, g); },
    sysfsGidType,
    [](ibv_context* c) { return rdmaCore().allocPd(c); },
    [](ibv_pd* pd) { return rdmaCore().deallocPd(pd); },
    [](ibv_pd* pd, void* a, size_t n, int access) { return rdmaCore().regMr(pd, a, n, access); },
    [](ibv_pd* pd, uint64_t offset, size_t n, uint64_t iova, int fd, int access) {
      return rdmaCore().regDmabufMr(pd, offset, n, iova, fd, access);
    },
    [](ibv_mr* mr) { return rdmaCore().deregMr(mr); },
    [](ibv_context* c, uint64_t* general, uint32_t* rc) {
      // What verbs.h's inline ibv_query_device_ex does, less its fallback to the basic query (which has
      // no paging capabilities to report).
      verbs_context* v = verbs_get_ctx_op(c, query_device_ex);
      if (v == nullptr) return EOPNOTSUPP;
      ibv_device_attr_ex a{};
      const int r = v->query_device_ex(c, nullptr, &a, sizeof a);
      if (r != 0) return r;
      *general = a.odp_caps.general_caps;
      *rc = a.odp_caps.per_transport_caps.rc_odp_caps;
      return 0;
    },
    [](ibv_context* c, int cqe) { return rdmaCore().createCq(c, cqe, nullptr, nullptr, 0); },
    [](ibv_cq* cq) { return rdmaCore().destroyCq(cq); },
    [](ibv_pd* pd, ibv_qp_init_attr* a) { return rdmaCore().createQp(pd, a); },
    [](ibv_qp* qp, ibv_qp_attr* a, int mask) { return rdmaCore().modifyQp(qp, a, mask); },
    [](ibv_qp* qp) { return rdmaCore().destroyQp(qp); },
    [](ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) { return ibv_post_send(qp, wr, bad); },
    [](ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) { return ibv_post_recv(qp, wr, bad); },
    [](ibv_cq* cq, int n, ibv_wc* wc) { return ibv_poll_cq(cq, n, wc); },
    &kRdmaCm,
};

std::atomic<const VerbsApi*> gApi{nullptr};

}  // namespace

const VerbsApi* verbsApi(std::string* why) {
  if (const VerbsApi* api = gApi.load()) return api;
  if (!rdmaCore().error.empty()) {
    *why = rdmaCore().error;
    return nullptr;
  }
  return &kRdmaCore;
}

const char* wcStatusText(ibv_wc_status status) {
  const RdmaCore& r = rdmaCore();
  return r.error.empty() ? r.wcStatusStr(status) : "(status text needs rdma-core)";
}

void setVerbsApiForTesting(const VerbsApi* api) { gApi.store(api); }

}  // namespace loom
