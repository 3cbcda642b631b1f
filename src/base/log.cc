#include "base/log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "base/params.h"

namespace loom {

namespace {

thread_local int tlsRank = -1;

struct SubsysName {
  const char* name;
  uint32_t bit;
};
const SubsysName kSubsys[] = {{"INIT", kInit},   {"BOOTSTRAP", kBootstrap}, {"TRANSPORT", kTransport},
                              {"COLL", kColl},   {"ALGO", kAlgo},           {"TOPO", kTopo},
                              {"NET", kNet},     {"ENV", kEnv},             {"ALL", kAllSubsys}};

const char* subsysName(uint32_t bit) {
  for (const auto& s : kSubsys)
    if (s.bit == bit) return s.name;
  return "MISC";
}

LogLevel parseLevel(const std::string& s) {
  if (strcasecmp(s.c_str(), "NONE") == 0) return LogLevel::None;
  if (strcasecmp(s.c_str(), "INFO") == 0) return LogLevel::Info;
  if (strcasecmp(s.c_str(), "TRACE") == 0) return LogLevel::Trace;
  return LogLevel::Warn;  // WARN and anything unrecognised (the value is echoed by loom-info)
}

std::string expandPath(const std::string& pattern) {
  std::string out;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[++i];
      if (c == 'h') { out += host; continue; }
      if (c == 'p') { out += std::to_string(getpid()); continue; }
      if (c == '%') { out += '%'; continue; }
      out += '%';
    }
    out += pattern[i];
  }
  return out;
}

struct Logger {
  LogLevel level;
  uint32_t mask;
  FILE* out;
  char host[64];
  std::mutex mu;
  Logger() {
    const Params& p = params();
    level = parseLevel(p.DEBUG);
    mask = parseSubsysMask(p.DEBUG_SUBSYS.c_str());
    out = stderr;
    if (!p.DEBUG_FILE.empty()) {
      FILE* f = std::fopen(expandPath(p.DEBUG_FILE).c_str(), "a");
      if (f != nullptr) out = f;
    }
    std::memset(host, 0, sizeof(host));
    gethostname(host, sizeof(host) - 1);
    if (char* dot = std::strchr(host, '.')) *dot = '\0';
  }
};

Logger& logger() {
  static Logger* l = new Logger();  // never destroyed: logging must work during static destruction
  return *l;
}

}  // namespace

uint32_t parseSubsysMask(const char* text) {
  if (text == nullptr || *text == '\0') return kAllSubsys;
  bool exclude = (*text == '^');
  if (exclude) ++text;
  uint32_t mask = 0;
  std::string s(text);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    std::string tok = s.substr(pos, comma - pos);
    for (const auto& e : kSubsys)
      if (!tok.empty() && strcasecmp(tok.c_str(), e.name) == 0) mask |= e.bit;
    pos = comma + 1;
  }
  return exclude ? ~mask : mask;
}

bool logEnabled(LogLevel level, uint32_t subsys) {
  Logger& l = logger();
  return static_cast<int>(level) <= static_cast<int>(l.level) && (l.mask & subsys) != 0;
}

void logMessage(LogLevel level, uint32_t subsys, const char* fmt, ...) {
  Logger& l = logger();
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* lvl = level == LogLevel::Warn ? "WARN" : level == LogLevel::Info ? "INFO" : "TRACE";
  std::lock_guard<std::mutex> g(l.mu);
  std::fprintf(l.out, "%s:%d:%d loom %s %s %s\n", l.host, static_cast<int>(getpid()), tlsRank, lvl,
               subsysName(subsys), msg);
  std::fflush(l.out);
}

void setLogRank(int rank) { tlsRank = rank; }

}  // namespace loom
