// libFuzzer target: what a stranger can send a rank before it trusts them.  The input is a bootstrap
// frame header (checked against a fixed secret) followed by a unique id (as a launcher might pass in
// from outside); both decoders must refuse garbage with a reason and never read past their input.
#include <cstdint>
#include <cstring>
#include <string>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  uint8_t secret[kSecretBytes];
  for (size_t i = 0; i < kSecretBytes; ++i) secret[i] = static_cast<uint8_t>(i * 37 + 1);
  if (size >= sizeof(BootstrapHeader)) {
    BootstrapHeader h;
    std::memcpy(&h, data, sizeof h);
    std::string why;
    const int nranks = size > sizeof h ? 1 + data[sizeof h] % 64 : 8;
    if (!validateBootstrapHeader(h, secret, nranks, &why) && why.empty()) __builtin_trap();  // refusals say why
    data += sizeof h;
    size -= sizeof h;
  }
  loomUniqueId raw;
  std::memset(&raw, 0, sizeof raw);
  std::memcpy(&raw, data, size < sizeof raw ? size : sizeof raw);
  UniqueIdData id;
  (void)decodeUniqueId(raw, &id);
  return 0;
}
