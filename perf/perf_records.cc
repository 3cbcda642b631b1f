#include "perf/perf_records.h"

#include <cerrno>
#include <cstring>

namespace loom::perf {

namespace {

// Names here are fixed identifiers (collective, type, op, backend names): nothing to escape.
void field(FILE* f, const char* key, const std::string& v, bool last = false) {
  std::fprintf(f, "\"%s\": \"%s\"%s", key, v.c_str(), last ? "" : ", ");
}

}  // namespace

bool Records::open(const std::string& csvPath, const std::string& jsonPath, const RunInfo& info,
                   std::string* error) {
  info_ = info;
  jsonPath_ = jsonPath;
  if (!csvPath.empty()) {
    csv_ = std::fopen(csvPath.c_str(), "w");
    if (csv_ == nullptr) {
      *error = "cannot create " + csvPath + ": " + std::strerror(errno);
      return false;
    }
    std::fprintf(csv_, "collective,backend,nranks,type,op,placement,bytes,iteration,time_us\n");
  }
  if (!jsonPath.empty()) {
    json_ = std::fopen(jsonPath.c_str(), "w");
    if (json_ == nullptr) {
      *error = "cannot create " + jsonPath + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

void Records::add(const Measurement& m, const std::vector<double>& perIterUs) {
  if (csv_ != nullptr)
    for (size_t i = 0; i < perIterUs.size(); ++i)
      std::fprintf(csv_, "%s,%s,%d,%s,%s,%s,%zu,%zu,%.3f\n", info_.collective.c_str(), info_.backend.c_str(),
                   info_.nranks, m.type.c_str(), m.op.c_str(), m.placement.c_str(), m.bytes, i, perIterUs[i]);
  if (json_ != nullptr) rows_.push_back(m);
}

bool Records::finish(double avgBusbw, long totalWrong, std::string* error) {
  bool ok = true;
  if (json_ != nullptr) {
    FILE* f = json_;
    std::fprintf(f, "{");
    field(f, "collective", info_.collective);
    field(f, "backend", info_.backend);
    std::fprintf(f, "\"nranks\": %d, \"iters\": %d, \"warmup\": %d, \"check\": %d,\n \"results\": [", info_.nranks,
                 info_.iters, info_.warmup, info_.check);
    for (size_t i = 0; i < rows_.size(); ++i) {
      const Measurement& m = rows_[i];
      std::fprintf(f, "%s\n  {", i ? "," : "");
      field(f, "type", m.type);
      field(f, "op", m.op);
      field(f, "placement", m.placement);
      std::fprintf(f, "\"bytes\": %zu, \"time_us\": %.3f, \"algbw_gbs\": %.6f, \"busbw_gbs\": %.6f, "
                   "\"cpu_s_per_gb\": %.6f, \"wrong\": ", m.bytes, m.timeUs, m.algbw, m.busbw, m.cpuSecPerGB);
      if (m.checked) std::fprintf(f, "%ld}", m.wrong);
      else std::fprintf(f, "null}");
    }
    std::fprintf(f, "\n ],\n \"avg_busbw_gbs\": %.6f, \"wrong_total\": %ld}\n", avgBusbw, totalWrong);
    if (std::ferror(f)) ok = false;
    if (std::fclose(json_) != 0) ok = false;
    json_ = nullptr;
    if (!ok) *error = "writing " + jsonPath_ + " failed";
  }
  if (csv_ != nullptr) {
    if (std::ferror(csv_) || std::fclose(csv_) != 0) {
      ok = false;
      *error = "writing the CSV file failed";
    }
    csv_ = nullptr;
  }
  return ok;
}

Records::~Records() {
  if (csv_ != nullptr) std::fclose(csv_);
  if (json_ != nullptr) std::fclose(json_);
}

}  // namespace loom::perf
