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
