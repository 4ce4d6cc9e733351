// Host lists: `-H host:slots,...` and `--hostfile` parsing (spec §2.1, §2.2). Pure functions with
// exact error texts; nothing here touches the network. Thread-compatible.
#ifndef ETRUN_DISCOVERY_HOST_SLOTS_H_
#define ETRUN_DISCOVERY_HOST_SLOTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace etrun::discovery {

// One host as the user wrote it, with its slot count. The name is kept verbatim: it becomes
// HOROVOD_HOSTNAME and names the host's local scope.
struct HostSlots {
  std::string name;
  int slots = 0;
  bool operator==(const HostSlots&) const = default;
};

// Parses `-H` text: comma-separated `host:slots` with surrounding whitespace allowed per element;
// host names are IsValidHostName's (letters, digits, '_', '.', '-', not first '-'). Slots may be
// 0. On success fills *hosts in the order given and returns true. On failure returns false and
// sets *err to a message naming the bad element; *hosts is then unchanged. A name given twice is
// an error (horovodrun accepts it and corrupts its bookkeeping).
bool ParseHostsFlag(std::string_view text, std::vector<HostSlots>* hosts, std::string* err);

// Parses hostfile contents (`path` only labels errors). Each non-blank line is
// `host [slots=N] [max_slots=M]`; `#` starts a comment; a host without `slots=` gets 1 slot
// (Open MPI's rule). Errors name the file and line: `hosts.txt line 3: ...`. Same contract as
// ParseHostsFlag otherwise.
bool ParseHostfile(std::string_view path, std::string_view contents,
                   std::vector<HostSlots>* hosts, std::string* err);

// Whether `name` is a host name etrun accepts: letters, digits, '_', '.', '-' (horovodrun's
// `[\w.-]+`, ASCII here), not empty, and not beginning with '-' (StartsLikeOption).
bool IsValidHostName(std::string_view name);

// Whether `name` begins with '-'. A command that takes the host as a word (ssh, a --remote-shell
// template, mpirun) would read such a name as an option (`ssh -G` prints its configuration and
// runs nothing), and no real host name begins with one (RFC 1123 labels begin with a letter or
// digit), so every place host names enter etrun refuses it, even where names are otherwise not
// held to IsValidHostName's characters (a Slurm node list, a pool's grant).
bool StartsLikeOption(std::string_view name);

// Why such a name is refused, for the caller to put after where it came from:
// "host names cannot begin with '-' (ssh or a remote shell would read '-G' as an option)".
std::string OptionLikeHostError(std::string_view name);

// `text` without leading and trailing whitespace (spaces, tabs, CR, LF, VT, FF).
std::string_view TrimWhitespace(std::string_view text);

// Total slots of all hosts, in 64 bits: each count may be up to INT_MAX.
int64_t TotalSlots(const std::vector<HostSlots>& hosts);

// Formats hosts back as `-H` text (`a:2,b:1`), for messages and mpirun.
std::string FormatHosts(const std::vector<HostSlots>& hosts);

}  // namespace etrun::discovery

#endif  // ETRUN_DISCOVERY_HOST_SLOTS_H_
