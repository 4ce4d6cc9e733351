#include "control/control_auth.h"

#include <errno.h>
#include <sys/random.h>

#include <cstdlib>
#include <vector>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "rendezvous/wire.h"

namespace etrun::control {

namespace {

constexpr size_t kHexBytes = 64;  // 32 bytes as hex: nonces, MACs, hashes

std::string Hex(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

bool IsHex64(std::string_view text) {
  if (text.size() != kHexBytes) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A request or answer number: decimal, no sign, no leading zero, at most 19 digits.
bool ReadNumber(std::string_view text, uint64_t* n) {
  if (text.empty() || text.size() > 19 || (text.size() > 1 && text[0] == '0')) return false;
  *n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    *n = *n * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

// `text` split at single spaces; empty fields (two spaces, a leading one) make it malformed.
std::vector<std::string_view> Fields(std::string_view text) {
  std::vector<std::string_view> out;
  while (out.size() < 8) {
    size_t space = text.find(' ');
    out.push_back(text.substr(0, space));
    if (out.back().empty()) return {};
    if (space == std::string_view::npos) return out;
    text.remove_prefix(space + 1);
  }
  return {};
}

bool SameHex(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// METHOD and TARGET go into the MACed text between newlines: one with a line break (which
// HTTP does not allow anyway) could be read two ways.
bool OneLine(std::string_view text) { return text.find_first_of("\r\n") == std::string_view::npos; }

std::string Joined(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) {
    if (!out.empty()) out += '\n';
    out.append(p);
  }
  return out;
}

}  // namespace

std::string RandomHex32() {
  unsigned char random[32];
  size_t got = 0;
  while (got < sizeof(random)) {
    ssize_t n = getrandom(random + got, sizeof(random) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      return "";
    }
  }
  return Hex(std::string_view(reinterpret_cast<const char*>(random), sizeof(random)));
}

std::string BodyHash(std::string_view body) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  static const char kEmpty = 0;
  if (EVP_Digest(body.empty() ? &kEmpty : body.data(), body.size(), digest, &length, EVP_sha256(),
                 nullptr) != 1) {
    std::abort();  // can't happen: SHA-256 is always available
  }
  return Hex(std::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string ServerProof(std::string_view token, std::string_view client_nonce, std::string_view server_nonce) {
  return Hex(rendezvous::HmacSha256(token, Joined({"etrun-auth v1 server", client_nonce, server_nonce})));
}

std::string SessionKey(std::string_view token, std::string_view client_nonce, std::string_view server_nonce) {
  return rendezvous::HmacSha256(token, Joined({"etrun-auth v1 session", client_nonce, server_nonce}));
}

std::string RequestMac(std::string_view key, uint64_t n, std::string_view method, std::string_view target,
                       std::string_view body_hash) {
  std::string number = std::to_string(n);
  return Hex(rendezvous::HmacSha256(key, Joined({"etrun-auth v1 request", number, method, target, body_hash})));
}

std::string ResponseMac(std::string_view key, uint64_t n, int status, std::string_view body_hash) {
  std::string number = std::to_string(n), code = std::to_string(status);
  return Hex(rendezvous::HmacSha256(key, Joined({"etrun-auth v1 response", number, code, body_hash})));
}

ServerAuth::ServerAuth(std::string token, std::string server_nonce, uint64_t max_body)
    : token_(std::move(token)), server_nonce_(std::move(server_nonce)), max_body_(max_body) {
  if (token_.empty() || !IsHex64(server_nonce_)) state_ = State::kRefused;  // nothing verifies
}

ServerAuth::Verdict ServerAuth::Refuse(int status, std::string why) {
  state_ = State::kRefused;
  key_.clear();
  return {Step::kRefuse, status, std::move(why)};
}

ServerAuth::Verdict ServerAuth::OnHeaders(std::string_view method, std::string_view target,
                                          std::string_view auth, int64_t body_bytes) {
  std::vector<std::string_view> f = Fields(auth);
  switch (state_) {
    case State::kNew:
      if (f.size() != 3 || f[0] != "v1" || f[1] != "hello" || !IsHex64(f[2])) {
        return Refuse(401, "authenticate first: this endpoint takes no request without the "
                           "Etrun-Auth exchange (a hello, then signed requests)");
      }
      if (method != kAuthMethod || target != kAuthTarget || body_bytes != 0) {
        return Refuse(400, "a hello is POST /auth with no body");
      }
      key_ = SessionKey(token_, f[2], server_nonce_);
      hello_reply_ = "v1 " + server_nonce_ + " " + ServerProof(token_, f[2], server_nonce_);
      state_ = State::kReady;
      return {Step::kHello, 200, ""};
    case State::kReady: {
      uint64_t n = 0;
      if (f.size() != 4 || f[0] != "v1" || !ReadNumber(f[1], &n) || !IsHex64(f[2]) || !IsHex64(f[3])) {
        return Refuse(401, "missing or malformed Etrun-Auth");
      }
      if (n != next_) return Refuse(401, "request number " + std::to_string(n) + ", expected " +
                                             std::to_string(next_) + " (a replay?)");
      if (!OneLine(method) || !OneLine(target)) return Refuse(400, "a line break in the request line");
      if (!SameHex(RequestMac(key_, n, method, target, f[2]), f[3])) {
        return Refuse(401, "the request's MAC does not verify");
      }
      body_hash_ = std::string(f[2]);
      if (body_bytes < 0) {
        state_ = State::kAnswer;
        return {Step::kAnswer, 411, "give the body's length (Content-Length)"};
      }
      if (static_cast<uint64_t>(body_bytes) > max_body_) {
        state_ = State::kAnswer;
        return {Step::kAnswer, 413, "a body of " + std::to_string(body_bytes) + " bytes is over " +
                                        "this endpoint's limit of " + std::to_string(max_body_)};
      }
      state_ = State::kBody;
      return {Step::kReadBody, 200, ""};
    }
    case State::kBody:
    case State::kAnswer:
      return Refuse(400, "a request before the last one was answered");
    case State::kRefused:
      break;
  }
  return Refuse(401, "this connection was refused already");
}

bool ServerAuth::CheckBody(std::string_view body) {
  if (state_ != State::kBody || !SameHex(BodyHash(body), body_hash_)) {
    Refuse(401, "");
    return false;
  }
  state_ = State::kAnswer;
  return true;
}

std::string ServerAuth::SignAnswer(int status, std::string_view body) {
  if (state_ != State::kAnswer) return "";
  std::string hash = BodyHash(body);
  std::string header = "v1 " + std::to_string(next_) + " " + hash + " " + ResponseMac(key_, next_, status, hash);
  ++next_;
  state_ = State::kReady;
  return header;
}

ClientAuth::ClientAuth(std::string token, std::string client_nonce)
    : token_(std::move(token)), client_nonce_(std::move(client_nonce)) {}

std::string ClientAuth::Hello() const { return "v1 hello " + client_nonce_; }

ClientAuth::Proof ClientAuth::OnHelloReply(int status, std::string_view auth) {
  std::vector<std::string_view> f = Fields(auth);
  if (status != 200 || f.size() != 3 || f[0] != "v1" || !IsHex64(f[1]) || !IsHex64(f[2])) {
    return Proof::kNone;
  }
  if (token_.empty() || !IsHex64(client_nonce_) ||
      !SameHex(ServerProof(token_, client_nonce_, f[1]), f[2])) {
    return Proof::kWrong;
  }
  key_ = SessionKey(token_, client_nonce_, f[1]);
  return Proof::kOk;
}

std::string ClientAuth::Sign(std::string_view method, std::string_view target, std::string_view body) {
  if (key_.empty() || sent_) return "";
  std::string hash = BodyHash(body);
  sent_ = true;
  return "v1 " + std::to_string(next_) + " " + hash + " " + RequestMac(key_, next_, method, target, hash);
}

bool ClientAuth::CheckAnswerHeaders(int status, std::string_view auth) {
  std::vector<std::string_view> f = Fields(auth);
  uint64_t n = 0;
  if (!sent_ || f.size() != 4 || f[0] != "v1" || !ReadNumber(f[1], &n) || n != next_ ||
      !IsHex64(f[2]) || !IsHex64(f[3]) || !SameHex(ResponseMac(key_, n, status, f[2]), f[3])) {
    return false;
  }
  answer_hash_ = std::string(f[2]);
  return true;
}

bool ClientAuth::CheckAnswerBody(std::string_view body) {
  if (!sent_ || answer_hash_.empty() || !SameHex(BodyHash(body), answer_hash_)) return false;
  answer_hash_.clear();
  sent_ = false;
  ++next_;
  return true;
}

}  // namespace etrun::control
