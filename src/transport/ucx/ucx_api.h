// UCX's functions, as the ucx transport calls them: from libucp and libucs, opened at run time the first
// time the transport is used (base/dynlib.h says why libloom does not link UCX: loading UCX installs its
// signal handlers and memory hooks in the process).  Each member is named after the function it holds.
#pragma once

#include <ucp/api/ucp.h>

#include <string>

namespace loom {

struct UcxApi {
  decltype(&::ucp_config_modify) ucp_config_modify;
  decltype(&::ucp_config_read) ucp_config_read;
  decltype(&::ucp_config_release) ucp_config_release;
  decltype(&::ucp_ep_close_nbx) ucp_ep_close_nbx;
  decltype(&::ucp_ep_create) ucp_ep_create;
  decltype(&::ucp_ep_flush_nbx) ucp_ep_flush_nbx;
  decltype(&::ucp_init_version) ucp_init_version;
  decltype(&::ucp_listener_create) ucp_listener_create;
  decltype(&::ucp_listener_destroy) ucp_listener_destroy;
  decltype(&::ucp_listener_query) ucp_listener_query;
  decltype(&::ucp_listener_reject) ucp_listener_reject;
  decltype(&::ucp_request_check_status) ucp_request_check_status;
  decltype(&::ucp_request_free) ucp_request_free;
  decltype(&::ucp_stream_recv_nbx) ucp_stream_recv_nbx;
  decltype(&::ucp_stream_recv_request_test) ucp_stream_recv_request_test;
  decltype(&::ucp_stream_send_nbx) ucp_stream_send_nbx;
  decltype(&::ucp_worker_arm) ucp_worker_arm;
  decltype(&::ucp_worker_create) ucp_worker_create;
  decltype(&::ucp_worker_destroy) ucp_worker_destroy;
  decltype(&::ucp_worker_get_efd) ucp_worker_get_efd;
  decltype(&::ucp_worker_progress) ucp_worker_progress;
  decltype(&::ucp_worker_signal) ucp_worker_signal;
  decltype(&::ucs_status_string) ucs_status_string;
  std::string error;  // empty when every function above is bound; else why UCX cannot be used
};

// The functions, loaded on first use; check error before calling any.
const UcxApi& ucx();

}  // namespace loom
