#include "device_runtime/device_api.h"

#include <atomic>
#include <mutex>

#include "base/log.h"
#include "base/params.h"
#include "loom_build_config.h"

namespace loom {

namespace {
std::atomic<DeviceApi*> installed{nullptr};
}

DeviceApi* installDeviceApi(DeviceApi* api) { return installed.exchange(api); }

DeviceApi* deviceApi() {
  if (DeviceApi* api = installed.load()) return api;
  // Asked once per process: the CUDA runtime's first call loads the driver (tens of milliseconds).
  static DeviceApi* const cuda = [] {
    std::string why;
    DeviceApi* api = nullptr;
    if (params().CUDA == 0) why = "LOOM_CUDA=0: device buffers and CUDA streams are not looked for";
    else api = cudaDeviceApi(&why);
    LOOM_INFO(kInit, "device memory: %s", why.c_str());
    return api;
  }();
  return cuda;
}

#if !LOOM_HAVE_CUDA
DeviceApi* cudaDeviceApi(std::string* why) {
  *why = "this build has no CUDA (configured with LOOM_WITH_CUDA=OFF or without the CUDA toolkit)";
  return nullptr;
}
#endif

}  // namespace loom
