// libFuzzer target: a topology file (LOOM_TOPO_FILE, or another host's XML received at init) is parsed
// and built into the machine model; anything malformed must be refused with a message, never crash,
// recurse without bound or loop.
#include <cstdint>
#include <memory>
#include <string>

#include "topo/system.h"
#include "topo/xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  std::unique_ptr<XmlNode> root;
  if (xmlParse(std::string(reinterpret_cast<const char*>(data), size), "fuzz.xml", &root) != loomSuccess) return 0;
  std::unique_ptr<TopoSystem> system;
  if (TopoSystem::build(*root, "fuzz.xml", &system) == loomSuccess) (void)xmlWrite(*root);
  return 0;
}
