// Keeps the glibc that etrun needs at 2.35 (Ubuntu 22.04, Debian 12 and newer; docs/install.md).
// libstdc++.a, linked in statically (CMakeLists.txt), carries std::random_device's object, which
// calls arc4random, a function glibc has had only since 2.36. etrun never uses std::random_device
// (its one seed comes from getrandom), but the object comes along with libstdc++'s string
// instantiations all the same, and its reference alone would make the binary refuse to load under
// glibc 2.35. Defined here, in the executable itself (an object, not an archive member, so that
// the linker sees it before libstdc++.a asks), the reference binds to this definition instead.
// It does what glibc's does: 32 random bits from the kernel's generator, never failing.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>

extern "C" uint32_t arc4random(void) {
  uint32_t value;
  size_t got = 0;
  while (got < sizeof(value)) {
    ssize_t n = getrandom(reinterpret_cast<char*>(&value) + got, sizeof(value) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      abort();  // glibc's aborts too: no kernel since 3.17 lacks getrandom
    }
  }
  return value;
}
