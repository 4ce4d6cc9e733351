#include "launcher/ssh/known_hosts.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

namespace etrun::launcher {

namespace {

std::string Base64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

// The type name at the start of a key blob ("ssh-ed25519"); empty if there is none.
std::string BlobType(std::string_view key) {
  if (key.size() < 4) return "";
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len = len << 8 | static_cast<uint8_t>(key[i]);
  if (len == 0 || len > 64 || key.size() < 4 + len) return "";
  std::string type(key.substr(4, len));
  for (char ch : type) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '@' || ch == '.' || ch == '_';
    if (!ok) return "";
  }
  return type;
}

// libssh2's known-hosts key type bit for a LIBSSH2_HOSTKEY_TYPE_*.
int KnownHostKeyBit(int key_type) {
  switch (key_type) {
    case LIBSSH2_HOSTKEY_TYPE_RSA: return LIBSSH2_KNOWNHOST_KEY_SSHRSA;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: return LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: return LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: return LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
    case LIBSSH2_HOSTKEY_TYPE_ED25519: return LIBSSH2_KNOWNHOST_KEY_ED25519;
    default: return LIBSSH2_KNOWNHOST_KEY_UNKNOWN;
  }
}

// The key types HostKeyMethods knows, with their handshake method names, in OpenSSH's order.
struct KeyMethods {
  int bit;
  std::string_view methods;
};
constexpr KeyMethods kKeyMethods[] = {
    {LIBSSH2_KNOWNHOST_KEY_ED25519, "ssh-ed25519"},
    {LIBSSH2_KNOWNHOST_KEY_ECDSA_256, "ecdsa-sha2-nistp256"},
    {LIBSSH2_KNOWNHOST_KEY_ECDSA_384, "ecdsa-sha2-nistp384"},
    {LIBSSH2_KNOWNHOST_KEY_ECDSA_521, "ecdsa-sha2-nistp521"},
    {LIBSSH2_KNOWNHOST_KEY_SSHRSA, "rsa-sha2-512,rsa-sha2-256,ssh-rsa"},
};

std::vector<std::string_view> SplitCommas(std::string_view list) {
  std::vector<std::string_view> out;
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (comma != 0) out.push_back(list.substr(0, comma));
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
  }
  return out;
}

// Reads all of `fd` from its start.
bool ReadAll(int fd, std::string* text, std::string* err) {
  char buffer[16384];
  off_t offset = 0;
  while (true) {
    ssize_t n = pread(fd, buffer, sizeof(buffer), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *err = std::string("cannot read it: ") + strerror(errno);
      return false;
    }
    if (n == 0) return true;
    text->append(buffer, static_cast<size_t>(n));
    offset += n;
  }
}

bool WriteAll(int fd, std::string_view bytes, std::string* err) {
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *err = std::string("cannot write it: ") + strerror(errno);
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

std::string KnownHostsName(const std::string& host, int port) {
  return port == 22 ? host : "[" + host + "]:" + std::to_string(port);
}

std::string KnownHostsLine(const std::string& name, std::string_view key) {
  std::string type = BlobType(key);
  if (type.empty()) return "";
  return name + " " + type + " " + Base64(key) + "\n";
}

KnownHosts::KnownHosts()
    : session_(libssh2_session_init()),
      hosts_(session_ != nullptr ? libssh2_knownhost_init(session_) : nullptr) {}

KnownHosts::~KnownHosts() {
  if (hosts_ != nullptr) libssh2_knownhost_free(hosts_);
  if (session_ != nullptr) libssh2_session_free(session_);
}

void KnownHosts::Parse(std::string_view text) {
  if (hosts_ == nullptr) return;
  std::string line;
  while (!text.empty()) {
    size_t end = text.find('\n');
    line.assign(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    // libssh2 1.10 takes a host field of one or two characters ("h1") for a hashed one and
    // drops the line without a word; ",h1" it reads as the list of names it is.
    size_t field = line.find_first_of(" \t", start);
    if (field != std::string::npos && field - start <= 2) line.insert(start, ",");
    // One line it cannot read is skipped (libssh2_knownhost_readfile would stop there).
    libssh2_knownhost_readline(hosts_, line.data(), line.size(), LIBSSH2_KNOWNHOST_FILE_OPENSSH);
  }
}

void KnownHosts::ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::ostringstream text;
  text << in.rdbuf();
  Parse(text.str());
}

std::string KnownHosts::HostKeyMethods(const std::string& host, int port,
                                       std::string_view defaults) const {
  std::vector<std::string_view> first;
  if (hosts_ != nullptr) {
    for (const KeyMethods& k : kKeyMethods) {
      // A stand-in key never matches: "mismatch" says a key of this type is recorded.
      int mask = LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | k.bit;
      if (libssh2_knownhost_checkp(hosts_, host.c_str(), port, "?", 1, mask, nullptr) ==
          LIBSSH2_KNOWNHOST_CHECK_MISMATCH) {
        for (std::string_view m : SplitCommas(k.methods)) first.push_back(m);
      }
    }
  }
  std::string out;
  auto add = [&out](std::string_view m) {
    if (!out.empty()) out += ',';
    out += m;
  };
  for (std::string_view m : first) add(m);
  for (std::string_view m : SplitCommas(defaults)) {
    bool listed = false;
    for (std::string_view f : first) listed = listed || f == m;
    if (!listed) add(m);
  }
  return out;
}

KnownHosts::Verdict KnownHosts::Check(const std::string& host, int port, std::string_view key,
                                      int key_type) const {
  if (hosts_ == nullptr) return Verdict::kUnknown;
  int plain = LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW;
  int check = libssh2_knownhost_checkp(hosts_, host.c_str(), port, key.data(), key.size(),
                                       plain | KnownHostKeyBit(key_type), nullptr);
  if (check == LIBSSH2_KNOWNHOST_CHECK_MATCH) return Verdict::kKnown;
  if (check == LIBSSH2_KNOWNHOST_CHECK_MISMATCH) return Verdict::kChanged;
  // Not found with its type: is the host recorded with keys of other types? (No key type bit:
  // libssh2 then compares with every key of the host.)
  check = libssh2_knownhost_checkp(hosts_, host.c_str(), port, key.data(), key.size(), plain,
                                   nullptr);
  return check == LIBSSH2_KNOWNHOST_CHECK_MISMATCH ? Verdict::kChanged : Verdict::kUnknown;
}

Recorded RecordHostKey(const std::string& path, const std::string& host, int port,
                       std::string_view key, int key_type, std::string* err) {
  std::string line = KnownHostsLine(KnownHostsName(host, port), key);
  if (line.empty()) {
    *err = "the host key names no type";
    return Recorded::kFailed;
  }
  // Every connection runs on a thread of its own (ssh_host.h), and all of them may meet a new
  // host at once: the read-check-append below is one step for the whole process. A mutex of the
  // process, not of an object: the connections share nothing else, and the file is the
  // process's (the user's) either way. flock adds other etrun processes that append at once.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    std::string dir = path.substr(0, slash);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      *err = "cannot create " + dir + ": " + strerror(errno);
      return Recorded::kFailed;
    }
  }
  int fd = open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    *err = errno == ELOOP ? std::string("it is a symbolic link, which etrun does not write through")
                          : std::string("cannot open it: ") + strerror(errno);
    return Recorded::kFailed;
  }
  int locked;
  do locked = flock(fd, LOCK_EX);
  while (locked != 0 && errno == EINTR);
  std::string text;
  Recorded result = Recorded::kFailed;
  if (ReadAll(fd, &text, err)) {
    KnownHosts now;
    now.Parse(text);
    switch (now.Check(host, port, key, key_type)) {
      case KnownHosts::Verdict::kKnown: result = Recorded::kAlreadyKnown; break;
      case KnownHosts::Verdict::kChanged: result = Recorded::kChanged; break;
      case KnownHosts::Verdict::kUnknown:
        // A last line without its newline (a hand edit) must not swallow ours.
        if (!text.empty() && text.back() != '\n') line.insert(0, "\n");
        if (WriteAll(fd, line, err)) result = Recorded::kAdded;
        break;
    }
  }
  close(fd);  // and the flock with it
  return result;
}

}  // namespace etrun::launcher
