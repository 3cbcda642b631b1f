#pragma once
// A rank's share of its machine's CPUs (LOOM_BIND).
#include <string>

struct loomComm;

namespace loom {

// Binds the calling thread (and so the threads loom starts after it) to its share of the machine's
// CPUs where the rule of LOOM_BIND holds; returns what it did, or why not, for the log.
std::string bindToShareOfMachine(const loomComm* comm);

}  // namespace loom
