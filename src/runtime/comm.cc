#include "runtime/comm.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "algos/channels.h"
#include "algos/selector.h"
#include "runtime/comm_topology.h"
#include "runtime/cpu_binding.h"
#include "base/log.h"
#include "base/params.h"
#include "device/device_call.h"
#include "device/p2p_call.h"
#include "transport/registry.h"
#include "transport/shm/shm_transport.h"

namespace loom {

namespace {

std::mutex gRegistryMutex;
std::set<loomComm*>& registry() {
  static auto* s = new std::set<loomComm*>();
  return *s;
}

uint64_t namespaceInode(const char* path) {
  struct stat st {};
  return stat(path, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// The kernel this process runs on, by its boot id: its ranks share one set of cores.
uint64_t machineIdentity() {
  std::string bootId;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> bootId;
  return hashBytes(bootId.data(), bootId.size());
}

// Ranks share a host when they share a kernel boot and a network namespace (ranks in different network
// namespaces are treated as different hosts: that is how containers and the test hosts look).
uint64_t hostIdentity(const char* hostName, uint64_t machine) {
  uint64_t h = hashBytes(hostName, std::strlen(hostName), machine);
  uint64_t netns = namespaceInode("/proc/self/ns/net");
  return hashBytes(&netns, sizeof(netns), h);
}

PeerInfo localPeerInfo(int rank) {
  PeerInfo p{};
  p.rank = rank;
  p.pid = static_cast<int32_t>(getpid());
  gethostname(p.hostName, sizeof(p.hostName) - 1);
  p.machineHash = machineIdentity();
  p.hostHash = hostIdentity(p.hostName, p.machineHash);
  p.pidNamespace = namespaceInode("/proc/self/ns/pid");
  p.cpuCount = static_cast<int32_t>(sysconf(_SC_NPROCESSORS_ONLN));
  return p;
}

struct ConnectMessage {
  uint32_t transportIndex;
  uint32_t channel;
  ConnectInfo info;
};

}  // namespace

loomResult_t startRoot(const UniqueIdData& id, int listenFd, double timeoutSec) {
  try {
    std::thread(runBootstrapRoot, listenFd, id, timeoutSec).detach();
  } catch (const std::exception& e) {
    close(listenFd);
    return setError(loomSystemError, "cannot start the bootstrap root thread: %s", e.what());
  }
  return loomSuccess;
}

namespace {
// What the algorithms and the cost model learn from the transports' capabilities: the slot a step
// crosses inside this host (shared memory where it reaches, else the network's) and across hosts, and
// the size from which the same-host transport sends direct posts.
void planSteps(loomComm* comm) {
  const PeerInfo& self = comm->peers[comm->rank];
  size_t hostSlot = 0, netSlot = 0;
  for (const Transport* t : transports()) {
    const TransportCaps c = t->caps();
    TransportEstimate est;
    std::string why;
    if (!c.queues || c.slotBytes == 0) continue;
    if (c.link == LinkKind::kSharedMemory && t->reaches(self, self, &est, &why)) {
      hostSlot = c.slotBytes;
      comm->costModel.hostDirectPostMin = c.directPostMin;
    }
    if (c.link == LinkKind::kNetwork) netSlot = netSlot == 0 ? c.slotBytes : std::min(netSlot, c.slotBytes);
  }
  if (hostSlot == 0) hostSlot = netSlot;  // shared memory off: ranks of a host talk over the network
  comm->hostStepBytes = hostSlot;
  comm->netStepBytes = std::min(hostSlot, netSlot);  // a step crosses the smallest slot on its way
}

}  // namespace

namespace {

// Everything init does once the communicator's fields from the caller are set: the bootstrap, the peer
// table, the topology, the cost model.  On the caller's thread, or on the background one (blocking = 0).
loomResult_t commSetUp(loomComm* comm, const UniqueIdData& id, const std::vector<UniqueIdData>& roots,
                       const CommParent* parent) {
  const int rank = comm->rank, nranks = comm->nranks;
  setLogRank(rank);
  if (id.rootInRank0 && rank == 0) {
    SocketAddress addr = id.root.unpack();
    int fd = -1;
    loomResult_t r = listenSocket(&addr, &fd);
    if (r != loomSuccess)
      return setError(r, "rank 0 cannot listen on LOOM_COMM_ID=%s: %s", params().COMM_ID.c_str(), lastError());
    LOOM_CHECK(startRoot(id, fd, comm->timeoutSec));
  }
  // Where init's time goes, for the log (issue 23 measures init at scale; shrink reuses what it can).
  const auto t0 = std::chrono::steady_clock::now();
  auto msSince = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  LOOM_CHECK(Bootstrap::create(id, roots, rank, nranks, comm->timeoutSec, &comm->abortFlag, &comm->bootstrap));

  comm->peers.resize(nranks);
  comm->peers[rank] = localPeerInfo(rank);
  LOOM_CHECK(comm->bootstrap->allGather(comm->peers.data(), sizeof(PeerInfo)));
  for (int r = 0; r < nranks; ++r) {
    if (comm->peers[r].rank != r)
      return setError(loomInternalError, "bootstrap allgather: slot %d holds rank %d", r, comm->peers[r].rank);
    comm->peers[r].hostName[sizeof(comm->peers[r].hostName) - 1] = '\0';
  }
  comm->localRanks = static_cast<int>(std::count_if(comm->peers.begin(), comm->peers.end(), [&](const PeerInfo& p) {
    return p.hostHash == comm->peers[rank].hostHash;
  }));
  // Whether a waiting rank may spin depends on every rank of this kernel, hosts in network namespaces
  // included: they take turns on the same cores (4 namespace hosts on 2 cores spun on each other's time).
  setLocalRanksPerCore(static_cast<int>(std::count_if(comm->peers.begin(), comm->peers.end(), [&](const PeerInfo& p) {
    return p.machineHash == comm->peers[rank].machineHash;
  })));
  if (comm->localRanks < nranks) setNetworkPeers();
  LOOM_CHECK(checkAlgoFilter());
  LOOM_CHECK(checkNetChoice());
  const double bootstrapMs = msSince(t0);
  const auto t1 = std::chrono::steady_clock::now();
  LOOM_CHECK(parent != nullptr ? commInheritTopology(comm, *parent) : commBuildTopology(comm));
  const double topologyMs = msSince(t1);
  // Before the probe and the transports' threads, which inherit it; a non-blocking init runs on a
  // thread of its own, whose binding would not be the caller's.
  if (parent == nullptr && comm->blocking) {
    const std::string binding = bindToShareOfMachine(comm);  // (not inside the log macro: it may not run)
    LOOM_INFO(kInit, "CPU affinity: %s", binding.c_str());
  }
  const auto t2 = std::chrono::steady_clock::now();
  comm->connections.resize(1);
  comm->connections[0].resize(nranks);
  planSteps(comm);  // before the probe, whose collectives plan their steps
  // The probe's collectives can lose peers like any other.
  LOOM_CHECK(comm->fail(parent != nullptr ? inheritCostModel(comm, parent->costModel) : tuneCostModel(comm)));
  LOOM_INFO(kInit, "comm %p%s%s rank %d/%d ready: %d rank(s) on this host, timeout %gs; init took %.1f ms "
            "(bootstrap %.1f, topology %.1f, probe %.1f)", static_cast<void*>(comm),
            comm->name.empty() ? "" : " ", comm->name.c_str(), rank, nranks, comm->localRanks, comm->timeoutSec,
            msSince(t0), bootstrapMs, topologyMs, msSince(t2));
  comm->engine = std::make_unique<ProgressEngine>(rank);  // its thread starts at the first stream call
  return loomSuccess;
}

}  // namespace

CommParent CommParent::of(const loomComm& parent, std::vector<int> ranks) {
  return CommParent{std::move(ranks), parent.peers, parent.cluster, parent.topoPolicy, parent.costModel};
}

loomResult_t commCreate(loomComm** out, int nranks, const UniqueIdData& id, int rank, const loomConfig_t* config,
                        const CommParent* parent, const std::vector<UniqueIdData>& roots) {
  auto comm = std::make_unique<loomComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->timeoutSec = static_cast<double>(params().TIMEOUT);
  if (config != nullptr && config->timeoutSec != LOOM_CONFIG_UNDEF_INT) comm->timeoutSec = config->timeoutSec;
  if (comm->timeoutSec <= 0)
    return setError(loomInvalidArgument, "timeout must be positive (LOOM_TIMEOUT or config.timeoutSec), got %g",
                    comm->timeoutSec);
  if (config != nullptr && config->commName != nullptr) comm->name = config->commName;
  comm->blocking = config == nullptr || config->blocking != 0;
  comm->key = hashBytes(id.secret, sizeof(id.secret));
  if (comm->blocking) {
    LOOM_CHECK(commSetUp(comm.get(), id, roots, parent));
    *out = comm.release();
    registerComm(*out);
    return loomSuccess;
  }
  // The id and the parent are copied into the work: the caller's may be gone when it runs.
  std::shared_ptr<const CommParent> from = parent != nullptr ? std::make_shared<CommParent>(*parent) : nullptr;
  loomComm* c = comm.release();
  registerComm(c);
  const loomResult_t r =
      runInBackground(c, [id, roots, from](loomComm* cc) { return commSetUp(cc, id, roots, from.get()); });
  if (r != loomInProgress) {
    unregisterComm(c);
    delete c;
    return r;
  }
  *out = c;
  return loomInProgress;
}

loomResult_t runInBackground(loomComm* comm, std::function<loomResult_t(loomComm*)> work) {
  joinBackground(comm);  // the previous work has ended (inProgress was false): collect its thread
  comm->inProgress.store(true);
  try {
    comm->background = std::thread([comm, work = std::move(work)] {
      const loomResult_t r = work(comm);
      if (r != loomSuccess && comm->error == loomSuccess) {
        comm->errorMessage = lastError();
        comm->error = r;
      }
      comm->inProgress.store(false, std::memory_order_release);
    });
  } catch (const std::exception& e) {
    comm->inProgress.store(false);
    return setError(loomSystemError, "cannot start the communicator's background thread: %s", e.what());
  }
  return loomInProgress;
}

void joinBackground(loomComm* comm) {
  if (comm->background.joinable()) comm->background.join();
}

loomResult_t checkNotInProgress(const loomComm* comm, const char* fn) {
  if (!comm->inProgress.load(std::memory_order_acquire)) return loomSuccess;
  return setError(loomInProgress, "%s: the communicator's init or finalize is still running (config.blocking = 0): "
                  "wait until loomCommGetAsyncError no longer reports loomInProgress", fn);
}

void commFree(loomComm* comm, bool drop) {
  unregisterComm(comm);
  comm->abortFlag.store(true);
  joinBackground(comm);  // a nonblocking init or finalize ends at the abort flag
  if (comm->engine != nullptr)
    comm->engine->shutdown(loomInvalidUsage, "the communicator was aborted or destroyed before this operation ran");
  // Calls still running on other threads see the abort flag within one wait slice (kWaitSliceMs).
  for (int i = 0; comm->activeCalls.load() > 0 && i < 5000; ++i) usleep(1000);
  if (drop)
    for (auto& row : comm->connections)
      for (Connection& c : row)
        if (c.send) c.send->abandon();
  delete comm;
}

CommCall::CommCall(loomComm* comm) : comm_(nullptr) {
  std::lock_guard<std::mutex> g(gRegistryMutex);
  if (comm != nullptr && registry().count(comm)) {
    comm->activeCalls.fetch_add(1);
    comm_ = comm;
    setLogRank(comm->rank);
  }
}

CommCall::~CommCall() {
  if (comm_ != nullptr) comm_->activeCalls.fetch_sub(1);
}

void registerComm(loomComm* comm) {
  std::lock_guard<std::mutex> g(gRegistryMutex);
  registry().insert(comm);
}

void unregisterComm(loomComm* comm) {
  std::lock_guard<std::mutex> g(gRegistryMutex);
  registry().erase(comm);
}

namespace {
// Liveness probe run between sleeps: a same-host peer whose process is gone will never answer.  Only
// the peer waited for counts (others may have finished and exited normally), but the message also names
// every other vanished peer: the one waited for often stopped because of them.
// A killed process whose parent has not reaped it yet (a launcher that waits for its children in order)
// still answers kill(pid, 0): its state in /proc says it is a zombie.
bool processGone(const PeerInfo& me, const PeerInfo& p) {
  if (p.hostHash != me.hostHash || p.pidNamespace != me.pidNamespace || p.pid == me.pid) return false;
  if (kill(p.pid, 0) != 0) return errno == ESRCH;
  char path[64], stat[256] = {};
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(p.pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  const size_t got = std::fread(stat, 1, sizeof stat - 1, f);
  std::fclose(f);
  // "pid (comm) S ...": the state follows the last ')' (the command name may hold one).
  const char* close = std::strrchr(stat, ')');
  return got > 0 && close != nullptr && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

// Whether `peer` closed one of its connections with us (it destroyed or aborted the communicator).
bool connectionClosed(const loomComm* comm, int peer) {
  for (const auto& row : comm->connections) {
    if (peer >= static_cast<int>(row.size())) continue;
    const Connection& c = row[peer];
    if ((c.send != nullptr && c.send->peerClosed()) || (c.recv != nullptr && c.recv->peerClosed())) return true;
  }
  return false;
}

std::string probePeers(const void* arg, int waitedFor) {
  const auto* comm = static_cast<const loomComm*>(arg);
  const PeerInfo& me = comm->peers[comm->rank];
  if (waitedFor < 0 || waitedFor >= comm->nranks) return "";
  if (!processGone(me, comm->peers[waitedFor])) {
    int culprit = -1, from = -1;
    if (comm->bootstrap != nullptr && comm->bootstrap->failureAnnounced(&culprit, &from))
      return "rank " + std::to_string(comm->rank) + " stopped waiting for " + comm->describe(waitedFor) + ": " +
             comm->describe(from) + " announced that " + comm->describe(culprit) + " failed";
    if (connectionClosed(comm, waitedFor))
      return "rank " + std::to_string(comm->rank) + " was waiting for " + comm->describe(waitedFor) +
             ", which closed its connection (it aborted or destroyed the communicator)";
    // A rank on another host: knock on its bootstrap listener, at most once a second per communicator.
    const auto now = std::chrono::steady_clock::now();
    if (comm->peers[waitedFor].hostHash == me.hostHash || comm->bootstrap == nullptr ||
        now - comm->lastLivenessProbe < std::chrono::seconds(1))
      return "";
    comm->lastLivenessProbe = now;
    if (comm->bootstrap->peerAlive(waitedFor)) return "";
    return "rank " + std::to_string(comm->rank) + " was waiting for " + comm->describe(waitedFor) +
           ", which is gone (its bootstrap listener refuses connections)";
  }
  std::string others;
  for (const PeerInfo& p : comm->peers)
    if (p.rank != waitedFor && processGone(me, p)) others += (others.empty() ? "" : ", ") + comm->describe(p.rank);
  return "rank " + std::to_string(comm->rank) + " was waiting for " + comm->describe(waitedFor) +
         ", which exited or was killed" + (others.empty() ? "" : "; also gone: " + others);
}
}  // namespace

}  // namespace loom

using namespace loom;

loomComm::~loomComm() {
  // A peer on this host that died between creating its receiving segment for us and our opening it
  // leaves the name behind (the opener unlinks it): remove those names, which are known.
  if (peers.size() != static_cast<size_t>(nranks) || rank < 0 || rank >= nranks) return;
  std::vector<int> local;
  for (const PeerInfo& p : peers)
    if (p.rank != rank && p.hostHash == peers[rank].hostHash) local.push_back(p.rank);
  removeShmLeftovers(key, rank, local, static_cast<int>(connections.size()));
}

loomResult_t loomComm::fail(loomResult_t code) {
  if (code != loomSuccess && error == loomSuccess) {
    if ((code == loomRemoteError || code == loomTimeout) && lastErrorPeer() >= 0) explainLostPeer(code, lastErrorPeer());
    errorMessage = lastError();
    error = code;
  }
  return code;
}

void loomComm::explainLostPeer(loomResult_t code, int lost) {
  if (bootstrap == nullptr || lost < 0 || lost >= nranks || lost == rank) return;
  const std::string detail = lastErrorDetail();
  // Peers announce whom they blame before they let go of their connections, so a failure that spreads
  // from rank to rank (each stopping because its neighbour stopped) is reported everywhere as the first.
  const int culprit = bootstrap->blame(lost);
  int none = -1;
  failedRank.compare_exchange_strong(none, culprit);
  bootstrap->announceFailure(culprit, /*everyone=*/true);
  if (culprit != lost) setError(code, "%s failed or died first; then: %s", describe(culprit).c_str(), detail.c_str());
}

const loomComm::UserOp* loomComm::userOp(loomRedOp_t op, loomDataType_t type) const {
  long i = static_cast<long>(op) - loomNumOps;
  if (i < 0 || i >= static_cast<long>(userOps.size()) || !userOps[i].live || userOps[i].type != type) return nullptr;
  return &userOps[i];
}

const void* loomComm::preMulScalar(loomRedOp_t op, loomDataType_t type) const {
  const UserOp* u = userOp(op, type);
  if (u == nullptr) return nullptr;
  return u->scalarAt != nullptr ? u->scalarAt : u->scalar;
}

std::string loomComm::describe(int peer) const {
  if (peer < 0 || peer >= nranks) return "rank ?";
  return "rank " + std::to_string(peer) + " (host " + peers[peer].hostName + ", pid " +
         std::to_string(peers[peer].pid) + ")";
}

WaitContext loomComm::waitContext(const char* what) const {
  WaitContext ctx;
  ctx.timeoutSec = timeoutSec;
  ctx.abort = &abortFlag;
  ctx.probe = probePeers;
  ctx.probeArg = this;
  ctx.describePeer = [](const void* arg, int peer) { return static_cast<const loomComm*>(arg)->describe(peer); };
  ctx.what = what;
  return ctx;
}

loomResult_t loomComm::connect(const std::vector<int>& wanted, int channel) {
  if (channel >= static_cast<int>(connections.size())) connections.resize(channel + 1);
  auto& row = connections[channel];
  row.resize(nranks);
  std::vector<int> todo;
  for (int p : wanted)
    if (p != rank && !row[p].connected() && std::find(todo.begin(), todo.end(), p) == todo.end()) todo.push_back(p);
  if (todo.empty()) return loomSuccess;

  const auto& all = transports();
  // Phase 1: build our receiving side for every peer and tell each peer how to reach it.
  for (int p : todo) {
    // The topology names the kind of link the pair should use; among the transports that reach the peer,
    // the one of that kind wins, else the best estimate.
    const Decision topo = pairTransport(*cluster, rank, p, topoPolicy);
    int best = -1;
    bool bestMatches = false;
    TransportEstimate bestEst;
    std::string why, bestWhy;
    for (size_t t = 0; t < all.size(); ++t) {
      if (!all[t]->caps().queues) continue;  // one-sided (p2p): the device path maps buffers per call
      TransportEstimate est;
      std::string reason;
      bool ok = all[t]->reaches(peers[rank], peers[p], &est, &reason);
      why += (why.empty() ? "" : "; ") + reason;
      const bool matches = all[t]->caps().link == topo.link;
      if (ok && (best < 0 || (matches && !bestMatches) ||
                 (matches == bestMatches && est.bandwidthGBs > bestEst.bandwidthGBs))) {
        best = static_cast<int>(t);
        bestMatches = matches;
        bestEst = est;
        bestWhy = reason;
      }
    }
    if (best < 0)
      return fail(setError(loomSystemError, "no transport reaches %s from rank %d: %s (topology: %s, %s)",
                           describe(p).c_str(), rank, why.c_str(), topo.choice.c_str(), topo.reason.c_str()));
    LOOM_INFO(kTransport, "rank %d -> %s channel %d: %s (topology: %s, %s%s; %s; est. %.1f GB/s, %.1f us)", rank,
              describe(p).c_str(), channel, all[best]->name(), topo.choice.c_str(), topo.reason.c_str(),
              bestMatches ? "" : " -- that transport is not available, using the best other", bestWhy.c_str(),
              bestEst.bandwidthGBs, bestEst.latencyUs);
    ConnectRequest req{rank, p, channel, key, &peers[rank], &peers[p]};
    ConnectMessage msg{};
    msg.transportIndex = static_cast<uint32_t>(best);
    msg.channel = static_cast<uint32_t>(channel);
    row[p].transport = all[best];
    threadedSends |= all[best]->caps().sendsFromThread;  // its send queues need flushSends()
    loomResult_t r = all[best]->createRecv(req, &msg.info, &row[p].recv);
    if (r == loomSuccess) r = bootstrap->send(p, 1000 + channel, &msg, sizeof(msg));
    if (r != loomSuccess) {
      row[p] = Connection();
      return fail(r);
    }
  }
  // Phase 2: attach to every peer's receiving side.
  for (int p : todo) {
    ConnectMessage msg{};
    loomResult_t r = bootstrap->recv(p, 1000 + channel, &msg, sizeof(msg));
    if (r == loomSuccess && (msg.transportIndex >= all.size() || all[msg.transportIndex] != row[p].transport))
      r = setError(loomInternalError, "rank %d and %s chose different transports", rank, describe(p).c_str());
    if (r == loomSuccess) {
      ConnectRequest req{rank, p, channel, key, &peers[rank], &peers[p]};
      r = row[p].transport->connectSend(req, msg.info, &row[p].send);
    }
    if (r != loomSuccess) {
      row[p] = Connection();
      return fail(r);
    }
  }
  // Phase 3: wait until every peer is attached to our side too.  Without it a rank could finish its
  // call and tear down its receiving side before a slower peer has attached to it.
  const char attached = 1;
  for (int p : todo) LOOM_CHECK(fail(bootstrap->send(p, 2000 + channel, &attached, 1)));
  for (int p : todo) {
    char ack = 0;
    LOOM_CHECK(fail(bootstrap->recv(p, 2000 + channel, &ack, 1)));
  }
  return loomSuccess;
}

loomResult_t loomComm::flushSends() {
  if (!threadedSends) return loomSuccess;
  WaitContext ctx = waitContext("flush");
  for (auto& row : connections)
    for (size_t p = 0; p < row.size(); ++p)
      if (row[p].send && row[p].send->needsFlush()) {
        ctx.peer = static_cast<int>(p);
        LOOM_CHECK(row[p].send->flush(ctx));
      }
  return loomSuccess;
}
