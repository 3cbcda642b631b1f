#include "transport/ib/verbs_api.h"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>

namespace loom {

namespace {

// RoCE v2 entries say so in sysfs (the verbs API of rdma-core 44 has no portable query for it).
int sysfsGidType(ibv_context* context, uint8_t port, int index) {
  const std::string path = std::string("/sys/class/infiniband/") + ibv_get_device_name(context->device) +
                           "/ports/" + std::to_string(port) + "/gid_attrs/types/" + std::to_string(index);
  std::ifstream f(path);
  std::string type;
  if (!std::getline(f, type)) return -1;
  return type.find("v2") != std::string::npos ? 2 : 1;
}

const RdmaCmApi kRdmaCm = {
    [] { return rdma_create_event_channel(); },
    [](rdma_event_channel* c) { rdma_destroy_event_channel(c); },
    [](rdma_event_channel* c, rdma_cm_id** id, void* ctx, rdma_port_space ps) { return rdma_create_id(c, id, ctx, ps); },
    [](rdma_cm_id* id) { return rdma_destroy_id(id); },
    [](rdma_cm_id* id, sockaddr* a) { return rdma_bind_addr(id, a); },
    [](rdma_cm_id* id, int backlog) { return rdma_listen(id, backlog); },
    [](rdma_cm_id* id) { return static_cast<uint16_t>(rdma_get_src_port(id)); },
    [](rdma_cm_id* id, sockaddr* src, sockaddr* dst, int ms) { return rdma_resolve_addr(id, src, dst, ms); },
    [](rdma_cm_id* id, int ms) { return rdma_resolve_route(id, ms); },
    [](rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* a) { return rdma_create_qp(id, pd, a); },
    [](rdma_cm_id* id) { rdma_destroy_qp(id); },
    [](rdma_cm_id* id, rdma_conn_param* p) { return rdma_connect(id, p); },
    [](rdma_cm_id* id, rdma_conn_param* p) { return rdma_accept(id, p); },
    [](rdma_cm_id* id, const void* data, uint8_t n) { return rdma_reject(id, data, n); },
    [](rdma_event_channel* c, rdma_cm_event** e) { return rdma_get_cm_event(c, e); },
    [](rdma_cm_event* e) { return rdma_ack_cm_event(e); },
    [](rdma_cm_event_type t) { return rdma_event_str(t); },
};

const VerbsApi kRdmaCore = {
    "rdma-core",
    [](int* n) { return ibv_get_device_list(n); },
    [](ibv_device** l) { ibv_free_device_list(l); },
    [](ibv_device* d) { return ibv_open_device(d); },
    [](ibv_context* c) { return ibv_close_device(c); },
    [](ibv_context* c, ibv_device_attr* a) { return ibv_query_device(c, a); },
    [](ibv_context* c, uint8_t p, ibv_port_attr* a) { return ibv_query_port(c, p, a); },
    [](ibv_context* c, uint8_t p, int i, ibv_gid* g) { return ibv_query_gid(c, p, i, g); },
    sysfsGidType,
    [](ibv_context* c) { return ibv_alloc_pd(c); },
    [](ibv_pd* pd) { return ibv_dealloc_pd(pd); },
    [](ibv_pd* pd, void* a, size_t n, int access) { return ibv_reg_mr(pd, a, n, access); },
    [](ibv_pd* pd, uint64_t offset, size_t n, uint64_t iova, int fd, int access) {
      return ibv_reg_dmabuf_mr(pd, offset, n, iova, fd, access);
    },
    [](ibv_mr* mr) { return ibv_dereg_mr(mr); },
    [](ibv_context* c, int cqe) { return ibv_create_cq(c, cqe, nullptr, nullptr, 0); },
    [](ibv_cq* cq) { return ibv_destroy_cq(cq); },
    [](ibv_pd* pd, ibv_qp_init_attr* a) { return ibv_create_qp(pd, a); },
    [](ibv_qp* qp, ibv_qp_attr* a, int mask) { return ibv_modify_qp(qp, a, mask); },
    [](ibv_qp* qp) { return ibv_destroy_qp(qp); },
    [](ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) { return ibv_post_send(qp, wr, bad); },
    [](ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) { return ibv_post_recv(qp, wr, bad); },
    [](ibv_cq* cq, int n, ibv_wc* wc) { return ibv_poll_cq(cq, n, wc); },
    &kRdmaCm,
};

std::atomic<const VerbsApi*> gApi{nullptr};

}  // namespace

const VerbsApi& rdmaCoreVerbs() { return kRdmaCore; }

const VerbsApi& verbsApi() {
  const VerbsApi* api = gApi.load();
  return api != nullptr ? *api : kRdmaCore;
}

void setVerbsApiForTesting(const VerbsApi* api) { gApi.store(api); }

}  // namespace loom
