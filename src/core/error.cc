#include "core/error.h"

#include <cstdarg>
#include <cstdio>

#include "core/log.h"

namespace loom {

namespace {
thread_local char tlsMessage[1024];
}

loomResult_t setError(loomResult_t code, const char* fmt, ...) {
  char msg[sizeof(tlsMessage) - 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  snprintf(tlsMessage, sizeof(tlsMessage), "%s: %s", loomGetErrorString(code), msg);
  LOOM_WARN(kAllSubsys, "%s", tlsMessage);
  return code;
}

const char* lastError() { return tlsMessage; }
void clearLastError() { tlsMessage[0] = '\0'; }

}  // namespace loom

// The public name of each result code (C API; here beside the error state so the core needs no more).
const char* loomGetErrorString(loomResult_t result) {
  switch (result) {
    case loomSuccess: return "no error";
    case loomUnhandledCudaError: return "unhandled cuda error";
    case loomSystemError: return "unhandled system error";
    case loomInternalError: return "internal error";
    case loomInvalidArgument: return "invalid argument";
    case loomInvalidUsage: return "invalid usage";
    case loomRemoteError: return "remote process exited or there was a network error";
    case loomInProgress: return "operation in progress";
    case loomTimeout: return "timeout";
    default: return "unknown result code";
  }
}
