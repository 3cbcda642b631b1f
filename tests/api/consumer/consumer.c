/* A plain C user of the installed library: the header compiles as C99 and a one-rank allreduce runs. */
#include <loom.h>
#include <stdio.h>

int main(void) {
  loomUniqueId id;
  loomComm_t comm;
  float v[2] = {1.5f, 2.5f};
  int version = 0;
  if (loomGetVersion(&version) != loomSuccess || version != LOOM_VERSION_CODE) return 1;
  if (loomGetUniqueId(&id) != loomSuccess) return 2;
  if (loomCommInitRank(&comm, 1, id, 0) != loomSuccess) {
    fprintf(stderr, "%s\n", loomGetLastError(NULL));
    return 3;
  }
  if (loomAllReduce(v, v, 2, loomFloat32, loomSum, comm, NULL) != loomSuccess || v[1] != 2.5f) return 4;
  if (loomCommDestroy(comm) != loomSuccess) return 5;
  printf("consumer: loom %d ok\n", version);
  return 0;
}
