// known_hosts: the user's ~/.ssh/known_hosts as OpenSSH keeps it, for the host key a connection
// is shown: looking it up (KnownHosts), the line OpenSSH's StrictHostKeyChecking=accept-new
// appends for a new host (KnownHostsLine; pure) and appending it (RecordHostKey). Internal to
// launcher/ssh/. A KnownHosts is one thread's; RecordHostKey may be called from every
// connection's thread at once (it serializes itself).
#ifndef ETRUN_LAUNCHER_SSH_KNOWN_HOSTS_H_
#define ETRUN_LAUNCHER_SSH_KNOWN_HOSTS_H_

#include <string>
#include <string_view>

#include <libssh2.h>

namespace etrun::launcher {

// How known_hosts names host:port: "host" on port 22, "[host]:port" on any other (OpenSSH's
// form, which libssh2_knownhost_checkp looks for).
std::string KnownHostsName(const std::string& host, int port);

// The line OpenSSH writes for a new host: "NAME TYPE BASE64\n", plain (not hashed), TYPE read
// from `key`, the host key blob as the server sent it (SSH wire format: a length-prefixed type
// name first). Empty when the blob holds no type name.
std::string KnownHostsLine(const std::string& name, std::string_view key);

// The keys of one known_hosts file. Lines libssh2 cannot read (markers such as
// @cert-authority, key types it does not know) are skipped: they hide no other line.
class KnownHosts {
 public:
  enum class Verdict {
    kKnown,    // this key is recorded for the host
    kUnknown,  // no key is recorded for the host
    kChanged,  // the host has recorded keys and this is none of them
  };

  // REQUIRES: libssh2_init has run.
  KnownHosts();
  ~KnownHosts();
  KnownHosts(const KnownHosts&) = delete;
  KnownHosts& operator=(const KnownHosts&) = delete;

  // Adds the lines of a known_hosts file's text.
  void Parse(std::string_view text);
  // Parse() of the file at `path`; a missing or unreadable file adds nothing.
  void ReadFile(const std::string& path);

  // The host key methods to offer host:port in the handshake (libssh2 names, comma-separated):
  // those of the key types recorded for it first, then the rest of `defaults` -- as OpenSSH
  // orders them, so that a host with keys of several types shows the one on record.
  std::string HostKeyMethods(const std::string& host, int port, std::string_view defaults) const;

  // What the file says of `key` (the blob the server sent; key_type: libssh2's
  // LIBSSH2_HOSTKEY_TYPE_*) for host:port. A host recorded only with keys of other types
  // counts as changed: HostKeyMethods asked for those first, and it offered none.
  Verdict Check(const std::string& host, int port, std::string_view key, int key_type) const;

 private:
  LIBSSH2_SESSION* session_;  // never connected: libssh2's known-hosts API needs one
  LIBSSH2_KNOWNHOSTS* hosts_;
};

// What RecordHostKey did.
enum class Recorded {
  kAdded,         // the line was appended
  kAlreadyKnown,  // the file (read again under the lock) has this key for the host by now
  kChanged,       // ... has another key for it by now: refuse, as KnownHosts::kChanged
  kFailed,        // nothing written; *err says why (one phrase)
};

// Records a host not in `path` as accept-new does: under a lock, reads the file again and
// appends KnownHostsLine unless it knows the host by now, so that hosts added at once by
// several connections all land, and one host added by two lands once. Creates the directory
// (0700) and the file (0600) when missing; never writes through a symbolic link at `path`.
// Serialized across this process's threads (a mutex) and, for processes that lock it too,
// with flock on the file. REQUIRES: libssh2_init has run.
Recorded RecordHostKey(const std::string& path, const std::string& host, int port,
                       std::string_view key, int key_type, std::string* err);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_SSH_KNOWN_HOSTS_H_
