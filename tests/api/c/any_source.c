/* loomRecvAnySource from C, as a C program uses it: 4 ranks forked from one process, rank 0 receives from
 * whichever rank sends first.  Every element of every message is checked against its sender's pattern.
 *   any_source            over shared memory
 *   any_source sockets    over the socket transport (LOOM_SHM_DISABLE=1)
 * Rank 1 sends a short message (10 ints) before its long one (1000 ints): receives from any source of
 * 1000 ints must leave the short one for the loomRecv from rank 1 that it belongs to, and rank 1's long
 * message comes only after it.  Then each sender sends one more, taken by three receives queued on a loom
 * stream.  Exits 0 when every check passed; prints what failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loom.h"

#define NRANKS 4
#define LONG 1000
#define SHORT 10

static int failures = 0;

#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "rank 0: FAIL: " __VA_ARGS__);    \
      fprintf(stderr, " (%s)\n", loomGetLastError(NULL)); \
      ++failures;                                        \
    }                                                    \
  } while (0)

static int pattern(int source, int i) { return source * 100000 + i; }

/* The message from `source` must hold its pattern in every element. */
static int wrongElements(const int* buf, int n, int source) {
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += buf[i] != pattern(source, i);
  return wrong;
}

/* Everyone meets: the senders' second messages are sent only after rank 0 took every first one. */
static loomResult_t barrier(loomComm_t comm) {
  int one = 1;
  return loomAllReduce(&one, &one, 1, loomInt32, loomSum, comm, NULL);
}

static int sender(int rank, loomComm_t comm) {
  int buf[LONG];
  if (rank == 1) {
    for (int i = 0; i < SHORT; ++i) buf[i] = pattern(rank, i);
    if (loomSend(buf, SHORT, loomInt32, 0, comm, NULL) != loomSuccess) return 2;
  }
  for (int i = 0; i < LONG; ++i) buf[i] = pattern(rank, i);
  if (loomSend(buf, LONG, loomInt32, 0, comm, NULL) != loomSuccess) return 3;
  if (barrier(comm) != loomSuccess) return 4;
  /* A second long message from every sender, for the receives on a loom stream. */
  if (loomSend(buf, LONG, loomInt32, 0, comm, NULL) != loomSuccess) return 5;
  return 0;
}

static int receiver(loomComm_t comm) {
  int buf[LONG];
  int seen[NRANKS] = {0};
  int source = -1;
  /* Bad calls are refused with a clear code, and the communicator stays usable. */
  CHECK(loomRecvAnySource(buf, LONG, loomInt32, NULL, comm, NULL) == loomInvalidArgument, "NULL source accepted");
  CHECK(loomRecvAnySource(buf, 0, loomInt32, &source, comm, NULL) == loomInvalidArgument, "count 0 accepted");
  loomGroupStart();
  CHECK(loomRecvAnySource(buf, LONG, loomInt32, &source, comm, NULL) == loomInvalidUsage, "accepted inside a group");
  loomGroupEnd();
  /* Ranks 2 and 3, in whichever order they come: rank 1's short message is at the head of its queue. */
  for (int k = 0; k < 2; ++k) {
    memset(buf, 0xff, sizeof buf);
    source = -1;
    CHECK(loomRecvAnySource(buf, LONG, loomInt32, &source, comm, NULL) == loomSuccess, "receive %d failed", k);
    CHECK(source == 2 || source == 3, "receive %d came from rank %d, not 2 or 3", k, source);
    if (source >= 0 && source < NRANKS) {
      ++seen[source];
      CHECK(wrongElements(buf, LONG, source) == 0, "message from rank %d has wrong elements", source);
    }
  }
  memset(buf, 0xff, sizeof buf);
  CHECK(loomRecv(buf, SHORT, loomInt32, 1, comm, NULL) == loomSuccess, "the short message from rank 1");
  CHECK(wrongElements(buf, SHORT, 1) == 0, "the short message from rank 1 has wrong elements");
  memset(buf, 0xff, sizeof buf);
  source = -1;
  CHECK(loomRecvAnySource(buf, LONG, loomInt32, &source, comm, NULL) == loomSuccess, "third receive failed");
  CHECK(source == 1, "third receive came from rank %d, not 1", source);
  CHECK(wrongElements(buf, LONG, 1) == 0, "long message from rank 1 has wrong elements");
  CHECK(seen[2] == 1 && seen[3] == 1, "ranks 2 and 3 were received %d and %d times", seen[2], seen[3]);
  CHECK(barrier(comm) == loomSuccess, "barrier");
  /* Three more on a loom stream: queued at once, each source written by the time the stream is done. */
  static int bufs[NRANKS - 1][LONG];
  int sources[NRANKS - 1] = {-1, -1, -1};
  loomStream_t stream = NULL;
  CHECK(loomStreamCreate(&stream) == loomSuccess, "loomStreamCreate");
  for (int k = 0; k < NRANKS - 1; ++k)
    CHECK(loomRecvAnySource(bufs[k], LONG, loomInt32, &sources[k], comm, stream) == loomSuccess, "stream receive %d", k);
  CHECK(loomStreamSynchronize(stream) == loomSuccess, "stream receives failed");
  loomStreamDestroy(stream);
  int mask = 0;
  for (int k = 0; k < NRANKS - 1; ++k) {
    CHECK(sources[k] >= 1 && sources[k] < NRANKS, "stream receive %d came from rank %d", k, sources[k]);
    if (sources[k] >= 1 && sources[k] < NRANKS) {
      mask |= 1 << sources[k];
      CHECK(wrongElements(bufs[k], LONG, sources[k]) == 0, "stream message from rank %d has wrong elements", sources[k]);
    }
  }
  CHECK(mask == 0xe, "stream receives did not take one message from each of ranks 1..3 (mask %#x)", mask);
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "sockets") == 0) setenv("LOOM_SHM_DISABLE", "1", 1);
  loomUniqueId id;
  if (loomGetUniqueId(&id) != loomSuccess) {
    fprintf(stderr, "loomGetUniqueId: %s\n", loomGetLastError(NULL));
    return 1;
  }
  pid_t pids[NRANKS];
  for (int r = 0; r < NRANKS; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      alarm(120); /* a hang fails the test instead of holding it */
      loomComm_t comm;
      if (loomCommInitRank(&comm, NRANKS, id, r) != loomSuccess) {
        fprintf(stderr, "rank %d: init: %s\n", r, loomGetLastError(NULL));
        _exit(1);
      }
      int rc = r == 0 ? receiver(comm) : sender(r, comm);
      if (loomCommDestroy(comm) != loomSuccess) rc = rc ? rc : 5;
      _exit(rc);
    }
  }
  int ok = 1;
  for (int r = 0; r < NRANKS; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d ended with status %#x\n", r, status);
      ok = 0;
    }
  }
  printf("any_source (%s): %s\n", argc > 1 ? argv[1] : "shared memory", ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}
