// Logging: one line per event, prefixed "host:pid:rank loom LEVEL SUBSYS", filtered by LOOM_DEBUG
// (level) and LOOM_DEBUG_SUBSYS (subsystems), written to stderr or LOOM_DEBUG_FILE.
#pragma once

#include <cstdint>

namespace loom {

enum class LogLevel : int { None = 0, Warn = 1, Info = 2, Trace = 3 };

enum Subsys : uint32_t {
  kInit = 1u << 0,
  kBootstrap = 1u << 1,
  kTransport = 1u << 2,
  kColl = 1u << 3,
  kAlgo = 1u << 4,
  kTopo = 1u << 5,
  kNet = 1u << 6,
  kEnv = 1u << 7,
  kAllSubsys = 0xffffffffu,
};

bool logEnabled(LogLevel level, uint32_t subsys);
void logMessage(LogLevel level, uint32_t subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// The rank shown in log lines written by this thread (-1 outside a communicator call).
void setLogRank(int rank);

// Parses a LOOM_DEBUG_SUBSYS value into a mask; exposed for tests.
uint32_t parseSubsysMask(const char* text);

}  // namespace loom

#define LOOM_LOG(level, subsys, ...)                                                          \
  do {                                                                                        \
    if (::loom::logEnabled(level, subsys)) ::loom::logMessage(level, subsys, __VA_ARGS__);    \
  } while (0)
#define LOOM_WARN(subsys, ...) LOOM_LOG(::loom::LogLevel::Warn, subsys, __VA_ARGS__)
#define LOOM_INFO(subsys, ...) LOOM_LOG(::loom::LogLevel::Info, subsys, __VA_ARGS__)
#define LOOM_TRACE(subsys, ...) LOOM_LOG(::loom::LogLevel::Trace, subsys, __VA_ARGS__)
