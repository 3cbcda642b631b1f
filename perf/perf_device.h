// Device memory for the perf tools' --memory device (CUDA builds with a GPU): buffers, copies between
// them and host mirrors (for filling inputs and checking results), and the stream the calls are issued
// on.  Without CUDA every function fails with a reason.
#pragma once

#include <cstddef>
#include <string>

namespace loom::perf {

// Whether device buffers can be used here, selecting GPU localRank modulo the GPUs; *why says why not.
bool deviceAvailable(int localRank, std::string* why);
void* deviceAlloc(size_t bytes);  // zeroed; nullptr on failure
void deviceFree(void* ptr);
bool copyToDevice(void* dst, const void* src, size_t bytes);
bool copyToHost(void* dst, const void* src, size_t bytes);
void* streamCreate();        // a cudaStream_t
bool streamSynchronize(void* stream);
void streamDestroy(void* stream);

}  // namespace loom::perf
