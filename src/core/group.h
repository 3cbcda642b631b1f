// loomGroupStart / loomGroupEnd: calls made between them are checked at once but only run at the
// outermost GroupEnd.  There, each communicator's collectives run in call order and then all its sends
// and receives progress together (so their order never deadlocks); several communicators run at once,
// one thread each (one thread may drive the ranks of a loomCommInitAll this way).
#pragma once

#include "core/collective.h"

namespace loom {

bool groupActive();  // on this thread
loomResult_t groupStart();
loomResult_t groupEnd();
void groupEnqueue(loomComm* comm, const CollArgs& args);

}  // namespace loom
