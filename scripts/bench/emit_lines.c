/* Benchmark rank: writes SIZE bytes (default 20 MiB) of 66-byte lines "r<rank> <seq> xxx...\n"
 * to stdout in 64 KiB writes. Native, so the launcher, not the generator, is what is measured.
 * The rank comes from HOROVOD_RANK (etrun) or OMPI_COMM_WORLD_RANK (mpirun). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  const char* r = getenv("HOROVOD_RANK");
  if (r == NULL) r = getenv("OMPI_COMM_WORLD_RANK");
  int rank = r ? atoi(r) : 0;
  long size = argc > 1 ? atol(argv[1]) : 20L << 20;
  long lines = size / 66;
  static char buf[1 << 16];
  size_t used = 0;
  for (long i = 0; i < lines; ++i) {
    if (used + 66 > sizeof(buf)) {
      if (write(1, buf, used) != (ssize_t)used) return 1;
      used = 0;
    }
    int n = snprintf(buf + used, 67, "r%d %ld ", rank, i);
    memset(buf + used + n, 'x', 65 - n);
    buf[used + 65] = '\n';
    used += 66;
  }
  if (used > 0 && write(1, buf, used) != (ssize_t)used) return 1;
  return 0;
}
