#include "transport/ib/ib_connection.h"

namespace loom {

rdma_conn_param connParam(const void* data, size_t bytes) {
  rdma_conn_param p{};
  p.private_data = data;
  p.private_data_len = static_cast<uint8_t>(bytes);
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  return p;
}

}  // namespace loom
