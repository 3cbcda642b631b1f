// loomGroupStart / loomGroupEnd: calls made between them are checked at once but only run at the
// outermost GroupEnd.  There, each communicator's collectives run in call order and then all its sends
// and receives progress together (so their order never deadlocks); several communicators run at once,
// one thread each (one thread may drive the ranks of a loomCommInitAll this way).  A group issued on a
// stream becomes one stream operation per communicator, all issued together (runtime/stream.h).
#pragma once

#include "runtime/collective.h"
#include "runtime/stream.h"

namespace loom {

bool groupActive();  // on this thread
loomResult_t groupStart();
loomResult_t groupEnd();
// Keeps a call for the outermost GroupEnd; every call of a group must name the same stream.
// `stream` is the call's loom stream, `deviceStream` its device stream (at most one is set).
loomResult_t groupEnqueue(const DeferredCall& call, Stream* stream, void* deviceStream);

}  // namespace loom
