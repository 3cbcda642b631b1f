#include "core/group.h"

#include <map>
#include <thread>
#include <vector>

#include "algos/p2p.h"
#include "core/log.h"

namespace loom {

namespace {

struct Queued {
  loomComm* comm;
  CollArgs args;
};

thread_local int tlsDepth = 0;
thread_local std::vector<Queued> tlsQueue;

// One communicator's share of a group: collectives in order, then every send and receive together.
loomResult_t runForComm(loomComm* comm, const std::vector<CollArgs>& calls) {
  CommCall pin(comm);
  if (!pin.ok()) return setError(loomInvalidUsage, "loomGroupEnd: a communicator of the group was destroyed first");
  std::vector<Transfer> transfers;
  for (const CollArgs& a : calls) {
    if (a.coll == CollType::Send || a.coll == CollType::Recv) {
      transfers.push_back(transferOf(a));
    } else {
      LOOM_CHECK(comm->fail(runCollective(comm, a)));
    }
  }
  LOOM_CHECK(comm->fail(runTransfers(comm, transfers, "group send/recv")));
  return comm->fail(comm->flushSends());
}

}  // namespace

bool groupActive() { return tlsDepth > 0; }

loomResult_t groupStart() {
  ++tlsDepth;
  return loomSuccess;
}

void groupEnqueue(loomComm* comm, const CollArgs& args) { tlsQueue.push_back(Queued{comm, args}); }

loomResult_t groupEnd() {
  if (tlsDepth == 0) return setError(loomInvalidUsage, "loomGroupEnd without a matching loomGroupStart");
  if (--tlsDepth > 0) return loomSuccess;
  std::vector<Queued> queue;
  queue.swap(tlsQueue);
  std::map<loomComm*, std::vector<CollArgs>> byComm;
  std::vector<loomComm*> order;
  for (const Queued& q : queue) {
    if (!byComm.count(q.comm)) order.push_back(q.comm);
    byComm[q.comm].push_back(q.args);
  }
  if (order.size() <= 1) return order.empty() ? loomSuccess : runForComm(order[0], byComm[order[0]]);
  std::vector<loomResult_t> results(order.size(), loomSuccess);
  std::vector<std::string> messages(order.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < order.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = runForComm(order[i], byComm[order[i]]);
      messages[i] = lastError();
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < order.size(); ++i)
    if (results[i] != loomSuccess) return setError(results[i], "loomGroupEnd: %s", messages[i].c_str());
  return loomSuccess;
}

}  // namespace loom
