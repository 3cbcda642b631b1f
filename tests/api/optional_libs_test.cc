// libloom opens UCX and rdma-core at run time, when a transport uses them (base/dynlib.h): a job over
// shared memory or sockets never loads UCX, so the program keeps its own signal handlers and memory
// hooks (loading UCX installs both); and a library that cannot be opened is an error that names it.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/dynlib.h"
#include "base/params.h"
#include "tests/common/multiprocess.h"
#include "tests/common/scoped_env.h"

namespace {

using loom::testing::forkRanks;
using loom::testing::timeBound;

bool isLoaded(const char* soname) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (h != nullptr) dlclose(h);
  return h != nullptr;
}

void programsOwnHandler(int) {}

TEST(OptionalLibraries, ShmAndSocketJobsLoadNoUcxAndKeepTheProgramsSignalHandler) {
  for (bool sockets : {false, true}) {
    SCOPED_TRACE(sockets ? "over sockets" : "over shared memory");
    loomUniqueId id;
    ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
    auto outcomes = forkRanks(2, [&](int rank) {
      struct sigaction mine {};
      mine.sa_handler = programsOwnHandler;
      sigemptyset(&mine.sa_mask);
      if (sigaction(SIGSEGV, &mine, nullptr) != 0) return 2;
      if (sockets) loom::testing::setInForkedRank("LOOM_SHM_DISABLE", "1");
      loom::paramsReloadForTesting();
      loomComm_t comm;
      if (loomCommInitRank(&comm, 2, id, rank) != loomSuccess) return 3;
      std::vector<float> v(100000, static_cast<float>(rank + 1));
      if (loomAllReduce(v.data(), v.data(), v.size(), loomFloat32, loomSum, comm, nullptr) != loomSuccess) return 4;
      for (float x : v)
        if (x != 3.0f) return 5;
      if (loomCommDestroy(comm) != loomSuccess) return 6;
      struct sigaction now {};
      if (sigaction(SIGSEGV, nullptr, &now) != 0 || now.sa_handler != programsOwnHandler) return 10;
      for (const char* ucx : {"libucs.so.0", "libucp.so.0", "libuct.so.0", "libucm.so.0"})
        if (isLoaded(ucx)) return 11;  // loaded: its handlers and memory hooks came with it
      return 0;
    }, timeBound(60));
    for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe() << " (10: SIGSEGV handler replaced, 11: UCX loaded)";
  }
}

TEST(OptionalLibraries, AMissingLibraryOrSymbolIsNamed) {
  loom::DynLib none;
  EXPECT_FALSE(none.open({"libloom-no-such-library.so.7", "libloom-no-such-library.so"}));
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.error().find("libloom-no-such-library.so.7"), std::string::npos) << none.error();
  EXPECT_NE(none.error().find("libloom-no-such-library.so:"), std::string::npos) << none.error();

  loom::DynLib libc;
  ASSERT_TRUE(libc.open({"libc.so.6"})) << libc.error();
  int (*getpidFn)() = nullptr;
  libc.bind("getpid", &getpidFn);
  EXPECT_TRUE(libc.ok());
  ASSERT_NE(getpidFn, nullptr);
  void (*missing)() = nullptr;
  libc.bind("loom_no_such_symbol", &missing);
  EXPECT_FALSE(libc.ok());
  EXPECT_EQ(missing, nullptr);
  EXPECT_NE(libc.error().find("libc.so.6 lacks loom_no_such_symbol"), std::string::npos) << libc.error();
}

}  // namespace
