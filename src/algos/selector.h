// Which algorithm runs a call.  Every algorithm of a collective is a candidate; LOOM_ALGO filters them;
// a cost model (alpha-beta: a latency per step, a time per byte) predicts each one's time for this
// size and communicator, and the fastest wins.  The model starts from constants per transport and is
// refined at init by a short probe (LOOM_TUNE_PROBE).  LOOM_DEBUG_SUBSYS=ALGO logs every choice with
// the predicted time of each candidate.
#pragma once

#include <string>
#include <vector>

#include "model/cost_model.h"
#include "runtime/collective.h"

struct loomComm;

namespace loom {

struct Candidate {
  Algo algo;
  loomResult_t (*run)(loomComm*, const CollArgs&);
  double predictedUs;
};

// The candidates for this call with their predicted times (after LOOM_ALGO's filter), best first.
std::vector<Candidate> rankCandidates(const loomComm* comm, const CollArgs& args);

// Fills comm->costModel: constants, then (LOOM_TUNE_PROBE=1) a probe between ring neighbours and, when
// the job spans hosts, between two hosts, whose results every rank shares through the bootstrap.
loomResult_t tuneCostModel(loomComm* comm);
// The same for a communicator made from another (split, shrink): the parent's probed speeds, nothing
// measured again, with the step latency scaled to the new number of ranks per core.
loomResult_t inheritCostModel(loomComm* comm, const CostModel& parent);

// Checks LOOM_ALGO: a name it does not know is loomInvalidArgument.
loomResult_t checkAlgoFilter();

}  // namespace loom
