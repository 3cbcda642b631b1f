#include "base/error.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "base/log.h"

namespace loom {

namespace {
thread_local char tlsMessage[1024];
thread_local size_t tlsDetailAt = 0;  // where the message follows the result code's name
thread_local int tlsPeer = -1;
thread_local int tlsQuiet = 0;
}

QuietErrors::QuietErrors() { ++tlsQuiet; }
QuietErrors::~QuietErrors() { --tlsQuiet; }

loomResult_t setError(loomResult_t code, const char* fmt, ...) {
  char msg[sizeof(tlsMessage) - 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const int at = snprintf(tlsMessage, sizeof(tlsMessage), "%s: ", loomGetErrorString(code));
  tlsDetailAt = at > 0 ? static_cast<size_t>(at) : 0;
  snprintf(tlsMessage + tlsDetailAt, sizeof(tlsMessage) - tlsDetailAt, "%s", msg);
  tlsPeer = -1;
  if (tlsQuiet == 0) LOOM_WARN(kAllSubsys, "%s", tlsMessage);
  return code;
}

const char* lastError() { return tlsMessage; }
const char* lastErrorDetail() { return tlsMessage + tlsDetailAt; }
void clearLastError() {
  tlsMessage[0] = '\0';
  tlsDetailAt = 0;
  tlsPeer = -1;
}
void restoreLastError(const std::string& saved) {
  snprintf(tlsMessage, sizeof(tlsMessage), "%s", saved.c_str());
  const size_t colon = saved.find(": ");
  tlsDetailAt = colon == std::string::npos ? 0 : std::min(colon + 2, saved.size());
}
int lastErrorPeer() { return tlsPeer; }
void setLastErrorPeer(int rank) { tlsPeer = rank; }

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
