// Which hosts a pre-flight finds sick, from what each host found (its own problems and its probes
// toward the others). Pure; any thread.
//
// A host is sick when
//  - something on it failed: the command's program is not there, too few GPUs, the launcher's
//    rendezvous port cannot be reached from it, it did not answer the check at all;
//  - it reaches fewer than half of the peers it probed, or fewer than half of those that probed
//    it reach it (two hosts that cannot reach each other are both named);
//  - every stream it sent, or (with two or more) every stream it received, ran below a quarter of
//    the median of the streams between the other hosts: a link of its is slow, not its peers'.
//    (Not the median of all: a throttled host slows the streams toward it too, its
//    acknowledgements queued behind its own sends, and with few hosts that median sinks with it.
//    With two hosts there is no other link: the median of both streams, and the sender of the
//    slow one is named.)
#ifndef ETRUN_LAUNCHER_PREFLIGHT_VERDICT_H_
#define ETRUN_LAUNCHER_PREFLIGHT_VERDICT_H_

#include <string>
#include <vector>

#include "launcher/preflight/probe.h"

namespace etrun::launcher::preflight {

struct HostCheck {
  std::string host;
  std::vector<std::string> problems;  // one phrase each: "cannot run 'python3': ..."
  std::vector<PeerResult> peers;      // its probes toward the others
};

struct SickHost {
  std::string host;
  std::string why;  // "; "-joined phrases, with what was measured
};

// Which streams went toward whom: the i-th host streams to the next and the one after it in
// `hosts`' order (to the other one, with two). Every host probes every other's connect.
std::vector<PeerTarget> TargetsFor(size_t i, const std::vector<std::string>& hosts,
                                   const std::vector<std::string>& ips, const std::vector<int>& ports);

// The sick hosts, in `checks`' order; *median_mbit_s is the median of all streams (-1: none).
std::vector<SickHost> Judge(const std::vector<HostCheck>& checks, double* median_mbit_s);

// "1234 Mbit/s", "12.5 Mbit/s".
std::string RateText(double mbit_s);

}  // namespace etrun::launcher::preflight

#endif  // ETRUN_LAUNCHER_PREFLIGHT_VERDICT_H_
