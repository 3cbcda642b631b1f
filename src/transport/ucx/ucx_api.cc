#include "transport/ucx/ucx_api.h"

#include "base/dynlib.h"

namespace loom {

const UcxApi& ucx() {
  static const UcxApi* api = [] {
    auto* a = new UcxApi();  // never freed: the libraries stay loaded
    DynLib ucp, ucs;
    if (ucs.open({"libucs.so.0", "libucs.so"}) && ucp.open({"libucp.so.0", "libucp.so"})) {
      ucp.bind("ucp_config_modify", &a->ucp_config_modify);
      ucp.bind("ucp_config_read", &a->ucp_config_read);
      ucp.bind("ucp_config_release", &a->ucp_config_release);
      ucp.bind("ucp_ep_close_nbx", &a->ucp_ep_close_nbx);
      ucp.bind("ucp_ep_create", &a->ucp_ep_create);
      ucp.bind("ucp_ep_flush_nbx", &a->ucp_ep_flush_nbx);
      ucp.bind("ucp_init_version", &a->ucp_init_version);
      ucp.bind("ucp_listener_create", &a->ucp_listener_create);
      ucp.bind("ucp_listener_destroy", &a->ucp_listener_destroy);
      ucp.bind("ucp_listener_query", &a->ucp_listener_query);
      ucp.bind("ucp_listener_reject", &a->ucp_listener_reject);
      ucp.bind("ucp_request_check_status", &a->ucp_request_check_status);
      ucp.bind("ucp_request_free", &a->ucp_request_free);
      ucp.bind("ucp_stream_recv_nbx", &a->ucp_stream_recv_nbx);
      ucp.bind("ucp_stream_recv_request_test", &a->ucp_stream_recv_request_test);
      ucp.bind("ucp_stream_send_nbx", &a->ucp_stream_send_nbx);
      ucp.bind("ucp_worker_arm", &a->ucp_worker_arm);
      ucp.bind("ucp_worker_create", &a->ucp_worker_create);
      ucp.bind("ucp_worker_destroy", &a->ucp_worker_destroy);
      ucp.bind("ucp_worker_get_efd", &a->ucp_worker_get_efd);
      ucp.bind("ucp_worker_progress", &a->ucp_worker_progress);
      ucp.bind("ucp_worker_signal", &a->ucp_worker_signal);
      ucs.bind("ucs_status_string", &a->ucs_status_string);
    }
    if (!ucs.ok()) a->error = ucs.error();
    else if (!ucp.ok()) a->error = ucp.error();
    if (!a->error.empty()) a->error += " (UCX: apt-get install libucx0)";
    return a;
  }();
  return *api;
}

}  // namespace loom
