// What the kernel says of a process that may be stuck: its state, the kernel function it waits
// in (its wait channel) and its command line, read from /proc/<pid>/{stat,wchan,cmdline}. The
// hang watchdog (hang_watch.h) shows them for ranks that give no Python stack; a remote host's
// agent reads them there and sends them as text (ProcFactsText). Pure but for ReadProcFacts.
#ifndef ETRUN_LAUNCHER_HANG_PROC_FACTS_H_
#define ETRUN_LAUNCHER_HANG_PROC_FACTS_H_

#include <sys/types.h>

#include <string>
#include <string_view>

namespace etrun::launcher::hang {

struct ProcFacts {
  char state = '?';     // R running, S sleeping, D uninterruptible (I/O), T stopped, Z zombie...
  std::string wchan;    // "" when running, or when the kernel does not say
  std::string command;  // argv joined by spaces, at most 200 bytes
  // When it waits for a child (a shell running the command it was given): that child's
  // description (DescribeProcFacts), followed down at most three generations; else "".
  std::string child;
};

// Reads them; false when the process is gone.
bool ReadProcFacts(pid_t pid, ProcFacts* facts);

// "state=S\nwchan=do_wait\ncommand=sh -c sleep 1000\nchild=...\n", and back (false for anything
// else).
std::string ProcFactsText(const ProcFacts& facts);
bool ParseProcFacts(std::string_view text, ProcFacts* facts);

// "state S (sleeping), waits in hrtimer_nanosleep: sleep 1000", for the verdict; with its child:
// "state S (sleeping), waits in do_wait: sh -c sleep 1000; its child: state S (sleeping), ...".
std::string DescribeProcFacts(const ProcFacts& facts);

}  // namespace etrun::launcher::hang

#endif  // ETRUN_LAUNCHER_HANG_PROC_FACTS_H_
