// Where a host's model comes from: detection with hwloc and sysfs, a user's NCCL-format file
// (LOOM_TOPO_FILE), or both merged by PCI bus id; and LOOM_TOPO_DUMP_FILE.
#pragma once

#include <memory>
#include <string>

#include "topo/system.h"
#include "topo/xml.h"

namespace loom {

// This host as an XML tree: one <cpu> per NUMA node with its PCI tree, keeping the bridges that lead to
// a GPU, NIC or NVSwitch.  Without hwloc in the build: one <cpu> and no devices, said in the log.
loomResult_t detectHost(std::unique_ptr<XmlNode>* out);

// Adds to `file` what `detected` knows and the file does not: attributes of devices with the same bus
// id, and detected devices the file leaves out (under the <cpu> of the same NUMA node).
void mergeTopology(XmlNode* file, const XmlNode& detected);

// This process's host model, as the communicator uses it: detection, merged into LOOM_TOPO_FILE when
// set, dumped to LOOM_TOPO_DUMP_FILE when set.  Computed once per process.
loomResult_t localTopology(std::shared_ptr<const TopoSystem>* out);

// The <pci> element of `busId` (dddd:bb:dd.f, lower case) under n, or nullptr.
XmlNode* findByBusId(XmlNode* n, const std::string& busId);

// The NUMA node this process runs on (its CPU binding, else where it runs now); -1 if unknown.
int currentNumaNode();

}  // namespace loom
