// Every libibverbs and librdmacm call the ib transport makes goes through this table, so that the
// transport's whole protocol can run against an emulated device in tests
// (tests/transport/emulated_verbs.h) on machines without an RDMA NIC.  The real table calls rdma-core,
// which libloom opens at run time (base/dynlib.h), the first time the ib transport looks for a device;
// ibv_post_send/recv and ibv_poll_cq, inline in verbs.h, become real functions here.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <string>

namespace loom {

// The librdmacm calls of the rdma_cm connection mode (iWARP devices keep their QP state in the kernel, so
// their queue pairs are connected by rdma_connect/rdma_accept instead of by modify_qp).
struct RdmaCmApi {
  rdma_event_channel* (*createEventChannel)();
  void (*destroyEventChannel)(rdma_event_channel* channel);
  int (*createId)(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps);
  int (*destroyId)(rdma_cm_id* id);
  int (*bindAddr)(rdma_cm_id* id, sockaddr* addr);
  int (*listen)(rdma_cm_id* id, int backlog);
  uint16_t (*srcPort)(rdma_cm_id* id);  // network byte order
  int (*resolveAddr)(rdma_cm_id* id, sockaddr* src, sockaddr* dst, int timeoutMs);
  int (*resolveRoute)(rdma_cm_id* id, int timeoutMs);
  int (*createQp)(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr);
  void (*destroyQp)(rdma_cm_id* id);
  int (*connect)(rdma_cm_id* id, rdma_conn_param* param);
  int (*accept)(rdma_cm_id* id, rdma_conn_param* param);
  int (*reject)(rdma_cm_id* id, const void* privateData, uint8_t length);
  int (*getEvent)(rdma_event_channel* channel, rdma_cm_event** event);
  int (*ackEvent)(rdma_cm_event* event);
  const char* (*eventName)(rdma_cm_event_type type);
};

struct VerbsApi {
  const char* name;  // "rdma-core" or the emulator's name, for messages
  ibv_device** (*getDeviceList)(int* count);
  void (*freeDeviceList)(ibv_device** list);
  ibv_context* (*openDevice)(ibv_device* device);
  int (*closeDevice)(ibv_context* context);
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr);
  int (*queryPort)(ibv_context* context, uint8_t port, ibv_port_attr* attr);
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  // RoCE GID type of a GID table entry: 2 for RoCE v2, 1 for RoCE v1/IB, -1 when unknown.
  int (*gidType)(ibv_context* context, uint8_t port, int index);
  ibv_pd* (*allocPd)(ibv_context* context);
  int (*deallocPd)(ibv_pd* pd);
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access);
  // Device memory exported as a dma-buf (GPUDirect RDMA), addressed by `iova` in work requests.
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
  int (*deregMr)(ibv_mr* mr);
  // On-demand paging: ibv_query_device_ex's odp_caps (general caps, RC caps); nonzero when the device
  // cannot say (it then has none).
  int (*odpCaps)(ibv_context* context, uint64_t* general, uint32_t* rc);
  ibv_cq* (*createCq)(ibv_context* context, int cqe);
  int (*destroyCq)(ibv_cq* cq);
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroyQp)(ibv_qp* qp);
  int (*postSend)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
  int (*postRecv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
  int (*pollCq)(ibv_cq* cq, int n, ibv_wc* wc);
  const RdmaCmApi* cm;
};

// The table in use: rdma-core's unless a test installed another; nullptr, with *why naming the missing
// library, when rdma-core cannot be loaded.
const VerbsApi* verbsApi(std::string* why);
// ibv_wc_status_str of rdma-core (through the table's library).
const char* wcStatusText(ibv_wc_status status);
// Tests only: installs `api` (null restores rdma-core's) for every ib transport created afterwards.
void setVerbsApiForTesting(const VerbsApi* api);

}  // namespace loom
