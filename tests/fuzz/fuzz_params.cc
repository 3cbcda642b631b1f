// libFuzzer target: environment-parameter values (every LOOM_* variable, by type) and the address and
// interface specs the bootstrap reads from the environment.
#include <cstdint>
#include <string>

#include "base/params.h"
#include "base/socket.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  int64_t value = 0;
  std::string why;
  switch (data[0] % 4) {
    case 0:
      if (!parseParamValue(ParamType::Int, text.c_str(), &value, &why) && why.empty()) __builtin_trap();
      break;
    case 1:
      if (!parseParamValue(ParamType::Size, text.c_str(), &value, &why) && why.empty()) __builtin_trap();
      break;
    case 2: {
      SocketAddress addr;
      (void)parseHostPort(text, &addr);
      break;
    }
    default:
      (void)interfaceMatches(text, "eth0");
      break;
  }
  return 0;
}
