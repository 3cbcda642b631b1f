// The communicator: who the ranks are (bootstrap + peer table), the connections to peers (one per peer
// and channel, each made by whichever transport gives the best estimate), and the error state.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "base/error.h"
#include "runtime/progress.h"
#include "model/cost_model.h"
#include "topo/cluster.h"
#include "topo/decisions.h"
#include "topo/routes.h"
#include "transport/transport.h"

namespace loom {
struct CollArgs;
class StagingPool;
class P2pMappings;

struct Connection {
  Transport* transport = nullptr;
  std::unique_ptr<SendQueue> send;
  std::unique_ptr<RecvQueue> recv;
  bool connected() const { return transport != nullptr; }
};

// A communicator made from another one (split, shrink): its rank r is the parent's rank ranks[r].  It
// takes the parent's host models and probed costs instead of exchanging and measuring them again (a
// shrink after a failure is then a bootstrap and nothing more: 4 ranks here, ~5 ms against ~120 ms).
// Copies, not a pointer: a nonblocking child's setup may outlive the call that made it.
struct CommParent {
  std::vector<int> ranks;
  std::vector<PeerInfo> peers;  // the parent's (who is who)
  std::shared_ptr<const Cluster> cluster;
  TopoPolicy topoPolicy;
  CostModel costModel;
  static CommParent of(const loomComm& parent, std::vector<int> ranks);
};

// Makes the communicator for `rank` of a job; rank 0 of a LOOM_COMM_ID job also runs the root.  With
// config.blocking = 0 the setup runs on the communicator's background thread: *out is set at once and
// the result is loomInProgress (loomCommGetAsyncError reports the rest).  `roots`: the ids of
// loomCommInitRankScalable, whose roots share the rendezvous (id then combines them); empty: id's root.
loomResult_t commCreate(loomComm** out, int nranks, const UniqueIdData& id, int rank, const loomConfig_t* config,
                        const CommParent* parent = nullptr, const std::vector<UniqueIdData>& roots = {});
// The checks every way to a new communicator makes of its arguments (init, split, shrink): the output
// pointer (set to NULL), the rank range, the config's header and what it asks for, the environment.
loomResult_t checkInitArgs(loomComm_t* comm, int nranks, int rank, const loomConfig_t* config, const char* fn);
// Frees it: waits (bounded) for calls in flight on other threads to notice the abort flag.  `drop`
// (abort, or a failed communicator): what the send queues still hold is dropped instead of sent.
void commFree(loomComm* comm, bool drop);

// Nonblocking communicators: runs work(comm) on comm's background thread (one at a time), marks the
// communicator in progress until it ends and records its failure as the communicator's error.
loomResult_t runInBackground(loomComm* comm, std::function<loomResult_t(loomComm*)> work);
// Waits for the background work, if any (bounded: it is bounded by the timeout and the abort flag).
void joinBackground(loomComm* comm);
// loomInProgress, with a message naming `fn`, while that work runs; else loomSuccess.
loomResult_t checkNotInProgress(const loomComm* comm, const char* fn);

// Starts the bootstrap root of a new id on a detached thread.
loomResult_t startRoot(const UniqueIdData& id, int listenFd, double timeoutSec);

// Registry of live communicators: API entry points validate handles against it, so a destroyed or bogus
// handle is loomInvalidArgument rather than a crash.  A CommCall pins the communicator for one call.
class CommCall {
 public:
  explicit CommCall(loomComm* comm);  // comm stays valid while the CommCall lives, if ok()
  ~CommCall();
  bool ok() const { return comm_ != nullptr; }

 private:
  loomComm* comm_;
};
void registerComm(loomComm* comm);
void unregisterComm(loomComm* comm);  // after this, new CommCalls on comm fail

}  // namespace loom

struct loomComm {
  ~loomComm();
  int rank = 0;
  int nranks = 0;
  double timeoutSec = 0;
  std::string name;
  uint64_t key = 0;  // names this communicator's shared resources (from the unique id's secret)
  std::unique_ptr<loom::Bootstrap> bootstrap;
  // When the waits' liveness probe last knocked on a remote rank's bootstrap listener (rate limit).
  mutable std::chrono::steady_clock::time_point lastLivenessProbe{};
  std::vector<loom::PeerInfo> peers;
  int localRanks = 1;  // ranks on this rank's host, itself included
  // Every rank's host and place on it, and the topology's plan (runtime/comm_topology.h).
  std::shared_ptr<const loom::Cluster> cluster;
  loom::TopoPolicy topoPolicy;
  loom::RoutePlan routes;
  loom::CostModel costModel;  // picks the algorithm of each call (algos/selector.h)
  // The step algorithms plan with (algos/primitives.h plannedStepBytes): the slot of the transports a
  // step crosses, inside a host and across hosts (the runtime reads them from the transports' caps).
  size_t hostStepBytes = 256u << 10, netStepBytes = 256u << 10;
  // The algorithm of the last call and what it was for (collective, bytes): loops skip the model.
  uint64_t lastChoiceKey = ~uint64_t{0};
  uint64_t anySourceTurn = 0;  // which peer a receive from any source looks at first (rotates)
  loomResult_t (*lastChoice)(loomComm*, const loom::CollArgs&) = nullptr;
  std::atomic<bool> abortFlag{false};
  std::atomic<int> activeCalls{0};
  std::atomic<bool> finalized{false};  // loomCommFinalize ran: only loomCommDestroy may follow
  // config.blocking = 0: init, split, shrink and finalize run on `background` while inProgress holds,
  // and every call but the queries, loomCommGetAsyncError, destroy and abort returns loomInProgress.
  bool blocking = true;
  std::atomic<bool> inProgress{false};
  std::thread background;
  int shrinks = 0;  // loomCommShrink calls made on this communicator (every survivor makes the same)
  std::atomic<int> failedRank{-1};  // the rank blamed for the first lost peer (loomCommGetFailedRank)

  // [channel][peer]
  std::vector<std::vector<loom::Connection>> connections;

  // PreMulSum ops made on this communicator; op id = loomNumOps + index.
  struct UserOp {
    bool live = false;
    loomDataType_t type = loomFloat32;
    const void* scalarAt = nullptr;  // loomScalarDevice: read at each call
    unsigned char scalar[8] = {};    // loomScalarHostImmediate: copied at creation
  };
  std::vector<UserOp> userOps;
  // The live PreMulSum op `op` of `type`, or nullptr when op is not one; and its scalar.
  const UserOp* userOp(loomRedOp_t op, loomDataType_t type) const;
  const void* preMulScalar(loomRedOp_t op, loomDataType_t type) const;

  // The first failure that broke the communicator; every later call returns it.  Atomic because
  // loomCommGetAsyncError reads it while the progress engine may be setting it; errorMessage is
  // written before error and never after.
  std::atomic<loomResult_t> error{loomSuccess};
  std::string errorMessage;

  // Connects (both directions) to every listed peer not connected yet on `channel`.  Collective between
  // each pair: both ranks of a pair must list each other at the same point of their call sequence.
  loomResult_t connect(const std::vector<int>& peers, int channel);
  // After a call: waits until every send queue that sends from a thread has sent all it was given, so
  // that a call that returned has really handed its data over (see SendQueue::flush).
  loomResult_t flushSends();
  bool threadedSends = false;  // some connection needs flushSends()
  loom::Connection& connection(int peer, int channel) { return connections[channel][peer]; }

  // Records a failure as the communicator's error (first one wins) and returns it.
  loomResult_t fail(loomResult_t code);
  // When a call failed because peer `lost` went away or went silent: names the rank that failed first
  // (the one `lost` announced, if it stopped because of an earlier failure) and announces it to every rank.
  void explainLostPeer(loomResult_t code, int lost);
  // "rank 3 (host hostname, pid 1234)" for messages.
  std::string describe(int peer) const;
  // Whether this rank is the lowest of those whose `where` (&PeerInfo::hostHash: its host,
  // &PeerInfo::machineHash: its machine) is its own: the one that does a host's or machine's work once.
  bool firstRankOf(uint64_t loom::PeerInfo::*where) const {
    for (int r = 0; r < rank; ++r)
      if (peers[r].*where == peers[rank].*where) return false;
    return true;
  }
  // Wait context for a blocking operation on this communicator (deadline = now + timeout).
  loom::WaitContext waitContext(const char* what) const;

  // Page-locked host buffers through which device buffers are staged (device/device_call.h); made at
  // the first call that needs them.
  std::unique_ptr<loom::StagingPool> staging;        // pinned host memory: device data staged
  std::unique_ptr<loom::StagingPool> deviceScratch;  // device memory: algorithms' scratch on the GPU
  bool gdrLogged = false;  // the GPUDirect RDMA decision was logged (device/gdr_path.h)
  bool gdrEverywhere = false;  // every rank may use GPUDirect RDMA (topo/decisions.h: gdrOnEveryRank)
  // Peers' device buffers mapped for the p2p path (device/p2p_call.h).
  std::unique_ptr<loom::P2pMappings> p2pMappings;

  // Runs the stream operations (runtime/progress.h).  Last member: destroyed (thread joined) first.
  std::unique_ptr<loom::ProgressEngine> engine;
};
