#include "cli/agent_image.h"

#include <cstddef>

// ETRUN_AGENT_FILE: the etrun-agent binary, named by CMakeLists.txt, which rebuilds this file
// whenever that binary changes.
#ifndef ETRUN_AGENT_FILE
#error "CMakeLists.txt names the etrun-agent binary to embed (ETRUN_AGENT_FILE)"
#endif

__asm__(".section .rodata.etrun_agent,\"a\",@progbits\n"
        ".balign 64\n"
        "etrun_agent_begin:\n"
        ".incbin \"" ETRUN_AGENT_FILE "\"\n"
        "etrun_agent_end:\n"
        ".previous\n");

extern "C" const char etrun_agent_begin[];
extern "C" const char etrun_agent_end[];

namespace etrun::cli {

std::string_view EmbeddedAgent() {
  return {etrun_agent_begin, static_cast<size_t>(etrun_agent_end - etrun_agent_begin)};
}

}  // namespace etrun::cli
