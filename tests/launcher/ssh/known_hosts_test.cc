// known_hosts (known_hosts.h): the lines etrun appends are OpenSSH's, byte for byte; a file's
// keys are looked up as OpenSSH would (port forms, hashed names, short names, lines libssh2
// cannot read); and recording a new host, on real files in a temporary directory, lands each
// host once, whatever runs at the same time, and never writes through a symbolic link.
#include "launcher/ssh/known_hosts.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <libssh2.h>

namespace etrun::launcher {
namespace {

namespace fs = std::filesystem;

// Public keys as ssh-keygen writes them (type, base64 blob).
constexpr const char* kEd25519A =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIOuD0z4P+Bj1w4wyB0mvbXN7pX0Zs84kBnhBfiTO8jK";
constexpr const char* kEd25519B =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILOPzUNHTcSs37T8PyF7zwv29eyFQf4Kgl3lLlqEF83Z";
constexpr const char* kEcdsa =
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBLe4Zf6VJyimBRx4ou0SM"
    "MFR8qbt7lHGZrAq7y4N0K3KyPIjO9rRXhGLqM1m7A6Mo68CK81bMESdFSgDfNDGElE=";
constexpr const char* kRsa =
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDfYGkiLNIs5k4nLG2RJ6ZLmATpYYMD5JqJzVIsxdDec/oTNp/s/Niwx"
    "fQb2h7a8ti00EVXbugo841cIoXoUDRHIif+fgYKn98WAnyM+kzp4huGZueCO9XoT9doycHI+mAhdCydtv1Wfq5pdty3Odk"
    "0QvBG5mZSiZOR3q8bFtHZjQ==";
// kEd25519A for "hashme", as `ssh-keygen -H` writes it.
constexpr const char* kHashed =
    "|1|+o+yoIpsXJ+pk0L7JkzgM3WUfr0=|aiqf+9+xnsdeICph6X6H49MswGg= "
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIOuD0z4P+Bj1w4wyB0mvbXN7pX0Zs84kBnhBfiTO8jK";

// The blob of a "type base64" public key: what the server sends.
std::string Blob(const std::string& public_key) {
  std::string b64 = public_key.substr(public_key.find(' ') + 1);
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned bits = 0, count = 0;
  for (char c : b64) {
    size_t v = kAlphabet.find(c);
    if (v == std::string::npos) break;  // '='
    bits = bits << 6 | static_cast<unsigned>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out += static_cast<char>((bits >> count) & 0xff);
    }
  }
  return out;
}

void Init() {
  static int once = libssh2_init(0);
  (void)once;
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct TempDir {
  fs::path path;
  TempDir() {
    char dir[] = "/tmp/etrun-known-hosts-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    path = dir;
  }
  ~TempDir() { fs::remove_all(path); }
};

TEST_CASE("known_hosts names a host as OpenSSH does: plain on port 22, [host]:port elsewhere") {
  CHECK(KnownHostsName("h1", 22) == "h1");
  CHECK(KnownHostsName("10.0.0.7", 22) == "10.0.0.7");
  CHECK(KnownHostsName("h1", 2222) == "[h1]:2222");
}

TEST_CASE("the line for a new host is the one OpenSSH's accept-new writes") {
  // Given the blobs servers send, the line is "name type base64" as in ssh-keygen's .pub files,
  // padding included (the ECDSA and RSA blobs' lengths are not multiples of 3).
  for (const char* key : {kEd25519A, kEcdsa, kRsa}) {
    CAPTURE(key);
    CHECK(KnownHostsLine("h1", Blob(key)) == std::string("h1 ") + key + "\n");
    CHECK(KnownHostsLine("[h1]:2222", Blob(key)) == std::string("[h1]:2222 ") + key + "\n");
  }
  CHECK(KnownHostsLine("h1", "").empty());
  CHECK(KnownHostsLine("h1", std::string("\0\0\0\x40short", 9)).empty());
  CHECK(KnownHostsLine("h1", std::string("\0\0\0\x03a b", 7)).empty());
}

TEST_CASE("a file's keys are looked up by name, port, hashed name and key type") {
  Init();
  KnownHosts known;
  known.Parse(std::string("# a comment\n\n") +
              "h1 " + kEd25519A + "\n" +
              "@cert-authority *.example.com " + kEd25519B + "\n" +  // libssh2 cannot read it
              "n2,10.0.0.2 " + kEd25519A + "\n" +
              "[h3]:2222 " + kEd25519A + "\n" +
              kHashed + "\n" +
              "rsa-only " + kRsa);  // no newline at the end
  std::string a = Blob(kEd25519A), b = Blob(kEd25519B);
  int ed = LIBSSH2_HOSTKEY_TYPE_ED25519;
  using V = KnownHosts::Verdict;
  // A one- or two-character name, which libssh2 alone would drop without a word.
  CHECK(known.Check("h1", 22, a, ed) == V::kKnown);
  CHECK(known.Check("h1", 22, b, ed) == V::kChanged);
  // A line libssh2 cannot read hides none after it; each name of a list counts.
  CHECK(known.Check("n2", 22, a, ed) == V::kKnown);
  CHECK(known.Check("10.0.0.2", 22, b, ed) == V::kChanged);
  CHECK(known.Check("h3", 2222, a, ed) == V::kKnown);
  CHECK(known.Check("h3", 2222, b, ed) == V::kChanged);
  CHECK(known.Check("hashme", 22, a, ed) == V::kKnown);
  CHECK(known.Check("hashme", 22, b, ed) == V::kChanged);
  CHECK(known.Check("h4", 22, a, ed) == V::kUnknown);
  CHECK(known.Check("h1", 2222, a, ed) == V::kKnown);  // libssh2 falls back to the plain name
  // Recorded only with an RSA key: an Ed25519 key is not a new host's, it is a changed one.
  CHECK(known.Check("rsa-only", 22, Blob(kRsa), LIBSSH2_HOSTKEY_TYPE_RSA) == V::kKnown);
  CHECK(known.Check("rsa-only", 22, a, ed) == V::kChanged);
}

TEST_CASE("the handshake asks first for the key types known for the host") {
  Init();
  KnownHosts known;
  known.Parse(std::string("rsa-only ") + kRsa + "\nboth " + kEcdsa + "\nboth " + kRsa + "\n");
  std::string defaults = "ssh-ed25519,ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256,ssh-rsa";
  CHECK(known.HostKeyMethods("rsa-only", 22, defaults) ==
        "rsa-sha2-512,rsa-sha2-256,ssh-rsa,ssh-ed25519,ecdsa-sha2-nistp256");
  CHECK(known.HostKeyMethods("both", 22, defaults) ==
        "ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256,ssh-rsa,ssh-ed25519");
  CHECK(known.HostKeyMethods("stranger", 22, defaults) == defaults);
}

TEST_CASE("recording a new host creates ~/.ssh and the file, privately, and appends its line") {
  Init();
  TempDir home;
  fs::path file = home.path / ".ssh" / "known_hosts";
  std::string err;
  int ed = LIBSSH2_HOSTKEY_TYPE_ED25519;
  REQUIRE(RecordHostKey(file, "h1", 22, Blob(kEd25519A), ed, &err) == Recorded::kAdded);
  struct stat st;
  REQUIRE(stat((home.path / ".ssh").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(RecordHostKey(file, "h2", 2222, Blob(kEd25519B), ed, &err) == Recorded::kAdded);
  CHECK(Slurp(file) == std::string("h1 ") + kEd25519A + "\n[h2]:2222 " + kEd25519B + "\n");

  SUBCASE("a host recorded meanwhile is not added again, and a different key for it is refused") {
    CHECK(RecordHostKey(file, "h1", 22, Blob(kEd25519A), ed, &err) == Recorded::kAlreadyKnown);
    CHECK(RecordHostKey(file, "h1", 22, Blob(kEd25519B), ed, &err) == Recorded::kChanged);
    CHECK(Slurp(file) == std::string("h1 ") + kEd25519A + "\n[h2]:2222 " + kEd25519B + "\n");
  }
  SUBCASE("a last line without its newline keeps its own line") {
    std::ofstream(file, std::ios::app) << "n9 " << kEcdsa;
    CHECK(RecordHostKey(file, "h3", 22, Blob(kEd25519A), ed, &err) == Recorded::kAdded);
    KnownHosts known;
    known.ReadFile(file);
    CHECK(known.Check("n9", 22, Blob(kEcdsa), LIBSSH2_HOSTKEY_TYPE_ECDSA_256) ==
          KnownHosts::Verdict::kKnown);
    CHECK(known.Check("h3", 22, Blob(kEd25519A), ed) == KnownHosts::Verdict::kKnown);
  }
}

TEST_CASE("a symbolic link at known_hosts is not written through") {
  Init();
  TempDir home;
  fs::create_directory(home.path / ".ssh");
  fs::path elsewhere = home.path / "elsewhere";
  std::ofstream(elsewhere) << "untouched\n";
  fs::create_symlink(elsewhere, home.path / ".ssh" / "known_hosts");
  std::string err;
  CHECK(RecordHostKey(home.path / ".ssh" / "known_hosts", "h1", 22, Blob(kEd25519A),
                      LIBSSH2_HOSTKEY_TYPE_ED25519, &err) == Recorded::kFailed);
  CHECK(err == "it is a symbolic link, which etrun does not write through");
  CHECK(Slurp(elsewhere) == "untouched\n");
}

TEST_CASE("hosts recorded by many connections at once all land, each once") {
  // 16 threads, as 16 connections: 8 hosts, each met by two of them at the same moment.
  Init();
  TempDir home;
  fs::path file = home.path / ".ssh" / "known_hosts";
  std::vector<Recorded> results(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      std::string err;
      results[i] = RecordHostKey(file, "host" + std::to_string(i % 8), 22,
                                 Blob(i % 8 % 2 == 0 ? kEd25519A : kEd25519B),
                                 LIBSSH2_HOSTKEY_TYPE_ED25519, &err);
    });
  }
  for (std::thread& t : threads) t.join();
  int added = 0, known = 0;
  for (Recorded r : results) {
    added += r == Recorded::kAdded;
    known += r == Recorded::kAlreadyKnown;
  }
  CHECK(added == 8);
  CHECK(known == 8);
  std::istringstream lines(Slurp(file));
  std::vector<std::string> got;
  for (std::string line; std::getline(lines, line);) got.push_back(line);
  std::sort(got.begin(), got.end());
  std::vector<std::string> want;
  for (int h = 0; h < 8; ++h) {
    want.push_back("host" + std::to_string(h) + " " + (h % 2 == 0 ? kEd25519A : kEd25519B));
  }
  CHECK(got == want);
}

}  // namespace
}  // namespace etrun::launcher
