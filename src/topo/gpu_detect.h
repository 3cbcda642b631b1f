// The GPUs of this host as NVML sees them (bus id, compute capability, NVLink peers, MIG instances,
// compute mode), merged into the detected topology.  NVML is loaded at run time (libnvidia-ml.so.1, part
// of the driver), so loom needs neither its header nor the driver to build or to run without GPUs.
#pragma once

#include <string>
#include <vector>

#include "topo/xml.h"

namespace loom {

struct DetectedNvlink {
  std::string remoteBusId;  // the GPU or NVSwitch at the other end
  bool toSwitch = false;
  int count = 1;            // active links to it
};

struct DetectedGpu {
  std::string busId;        // dddd:bb:dd.f, lower case
  int dev = -1;             // CUDA device index (NVML's order when CUDA does not say)
  int sm = 0;               // compute capability x 10
  std::string computeMode;  // "default", "exclusive_process" or "prohibited"
  std::vector<DetectedNvlink> nvlinks;
  std::vector<std::string> migUuids;  // MIG instances; empty when MIG is off
};

// NVML's view of this host's GPUs; empty, with the reason in *why, when NVML is absent or sees none.
std::vector<DetectedGpu> probeGpusWithNvml(std::string* why);

// Puts each GPU into a detected <system>: a <gpu dev sm compute_mode> with its <nvlink target count
// tclass> and <mig uuid> children under the <pci> of the same bus id, that <pci> made under the first
// <cpu> when the PCI walk did not see it (containers often hide the PCI tree).
void addGpus(XmlNode* system, const std::vector<DetectedGpu>& gpus);

}  // namespace loom
