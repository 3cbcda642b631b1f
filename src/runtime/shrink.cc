// loomCommShrink: the survivors of a communicator make a new one among themselves.
//
// The old communicator's bootstrap still knows every rank's listener, and its point-to-point messages
// need no ring (which a dead rank breaks).  The first surviving rank makes a new unique id and hands it
// to every other survivor that way; then all of them join the new communicator as any init does.  What
// a survivor needs from the user is the list of ranks to leave out, which every survivor must pass
// alike (as with NCCL's ncclCommShrink and MPI's MPI_Comm_shrink after an agreement).
//
// Reused: the old communicator's host models and probed costs (CommParent), so the new one exchanges
// and measures nothing again.  Not reused: its connections between survivors (an aborted stream may
// have left half a frame in them); the new communicator connects on first use, as any does.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "runtime/comm.h"
#include "runtime/progress.h"

using namespace loom;

namespace {

// Bootstrap tags of the shrink messages: above the connection setup's (1000 + channel, 2000 + channel).
constexpr int kShrinkTag = 3000000;

loomResult_t checkShrinkArgs(const loomComm* comm, const int* exclude, int nExclude, int flags,
                             std::vector<char>* excluded) {
  if (flags != LOOM_SHRINK_DEFAULT && flags != LOOM_SHRINK_ABORT)
    return setError(loomInvalidArgument, "loomCommShrink: flags %d is neither LOOM_SHRINK_DEFAULT nor "
                    "LOOM_SHRINK_ABORT", flags);
  if (nExclude < 0 || nExclude >= comm->nranks)
    return setError(loomInvalidArgument, "loomCommShrink: nExclude %d must be in [0, %d) (at least one rank "
                    "must remain)", nExclude, comm->nranks);
  if (nExclude > 0 && exclude == nullptr)
    return setError(loomInvalidArgument, "loomCommShrink: excludeRanks is NULL with nExclude %d", nExclude);
  excluded->assign(static_cast<size_t>(comm->nranks), 0);
  for (int i = 0; i < nExclude; ++i) {
    const int r = exclude[i];
    if (r < 0 || r >= comm->nranks)
      return setError(loomInvalidArgument, "loomCommShrink: excludeRanks[%d] = %d is not a rank of this "
                      "communicator [0, %d)", i, r, comm->nranks);
    if ((*excluded)[static_cast<size_t>(r)])
      return setError(loomInvalidArgument, "loomCommShrink: rank %d is listed twice in excludeRanks", r);
    (*excluded)[static_cast<size_t>(r)] = 1;
  }
  if ((*excluded)[static_cast<size_t>(comm->rank)])
    return setError(loomInvalidUsage, "loomCommShrink: rank %d is in excludeRanks: excluded ranks do not call "
                    "loomCommShrink", comm->rank);
  return loomSuccess;
}

}  // namespace

loomResult_t loomCommShrink(loomComm_t comm, const int* excludeRanks, int nExclude, loomComm_t* newcomm,
                            loomConfig_t* config, int flags) {
  if (newcomm == nullptr) return setError(loomInvalidArgument, "loomCommShrink: newcomm is NULL");
  *newcomm = nullptr;
  CommCall call(comm);  // a failed communicator is welcome here: shrinking it is the point
  if (!call.ok())
    return setError(loomInvalidArgument, "loomCommShrink: comm %p is not a live communicator",
                    static_cast<const void*>(comm));
  LOOM_CHECK(checkNotInProgress(comm, "loomCommShrink"));
  std::vector<char> excluded;
  LOOM_CHECK(checkShrinkArgs(comm, excludeRanks, nExclude, flags, &excluded));
  if (config != nullptr) LOOM_CHECK(checkInitArgs(newcomm, 1, 0, config, "loomCommShrink"));
  if (flags == LOOM_SHRINK_ABORT) {
    // What is still queued or running on comm's streams waits for ranks that may be dead: end it now
    // (it fails with loomRemoteError), then stop watching the flag so that the survivors can talk.
    comm->abortFlag.store(true);
    comm->engine->drain();
    comm->fail(setError(loomRemoteError, "the communicator was shrunk after a failure (LOOM_SHRINK_ABORT)"));
  } else {
    comm->engine->drain();
  }
  comm->bootstrap->watchAbort(nullptr);  // bounded by the timeout instead
  // A communicator shrunk without an abort goes on beside the new one: its bootstrap watches its flag again.
  struct RewatchAbort {
    loomComm* c;
    bool on;
    ~RewatchAbort() {
      if (on) c->bootstrap->watchAbort(&c->abortFlag);
    }
  } rewatch{comm, flags == LOOM_SHRINK_DEFAULT};

  std::vector<int> survivors;
  for (int r = 0; r < comm->nranks; ++r)
    if (!excluded[static_cast<size_t>(r)]) survivors.push_back(r);
  const int leader = survivors.front();
  const int newRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), comm->rank) - survivors.begin());
  const int tag = kShrinkTag + comm->shrinks++;
  UniqueIdData id{};
  if (comm->rank == leader) {
    int fd = -1;
    loomResult_t made = makeUniqueId(&id, &fd, /*jobId=*/false);
    if (made == loomSuccess && fd >= 0) made = startRoot(id, fd, comm->timeoutSec);
    // The others wait for the id: they get a zeroed one (a failure they report) rather than nothing.
    if (made != loomSuccess) std::memset(&id, 0, sizeof id);
    for (int r : survivors) {
      if (r == leader) continue;
      const loomResult_t sent = comm->bootstrap->send(r, tag, &id, sizeof id);
      if (sent != loomSuccess && made == loomSuccess) made = sent;
    }
    LOOM_CHECK(made);
  } else {
    LOOM_CHECK(comm->bootstrap->recv(leader, tag, &id, sizeof id, /*despiteFailures=*/true));
    UniqueIdData none{};
    if (std::memcmp(&id, &none, sizeof id) == 0)
      return setError(loomSystemError, "loomCommShrink: rank %d (the first survivor) could not make the new "
                      "communicator's id", leader);
  }
  LOOM_INFO(kInit, "shrink: rank %d of %d becomes rank %d of %d", comm->rank, comm->nranks, newRank,
            static_cast<int>(survivors.size()));
  loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
  cfg.timeoutSec = static_cast<int>(comm->timeoutSec);
  const CommParent parent = CommParent::of(*comm, survivors);
  return commCreate(newcomm, static_cast<int>(survivors.size()), id, newRank, config != nullptr ? config : &cfg,
                    &parent);
}
