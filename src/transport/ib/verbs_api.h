// Every libibverbs call the ib transport makes goes through this table, so that the transport's whole
// protocol can run against an emulated device in tests (tests/transport/emulated_verbs.h) on machines
// without an RDMA NIC.  The real table calls rdma-core; ibv_post_send/recv and ibv_poll_cq, inline in
// verbs.h, become real functions here.
#pragma once

#include <infiniband/verbs.h>

namespace loom {

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
  int (*deregMr)(ibv_mr* mr);
  ibv_cq* (*createCq)(ibv_context* context, int cqe);
  int (*destroyCq)(ibv_cq* cq);
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroyQp)(ibv_qp* qp);
  int (*postSend)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
  int (*postRecv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
  int (*pollCq)(ibv_cq* cq, int n, ibv_wc* wc);
};

// The table in use: rdma-core's unless a test installed another.
const VerbsApi& verbsApi();
const VerbsApi& rdmaCoreVerbs();
// Tests only: installs `api` (null restores rdma-core's) for every ib transport created afterwards.
void setVerbsApiForTesting(const VerbsApi* api);

}  // namespace loom
