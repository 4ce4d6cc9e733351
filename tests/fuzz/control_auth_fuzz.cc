// libFuzzer target: the server side of the control endpoints' exchange (control/control_auth.h)
// on one connection, fed what the input says: raw bytes parsed as HTTP requests exactly as the
// server parses them (headers first, then the announced body), genuine hellos and signed
// requests of a client that holds the token, those with one input-chosen bit flipped, and raw
// texts as a hello's answer to a client. Beyond "no crash", checks:
// - nothing but a correct MAC is ever accepted: every request the server takes carries
//   "v1 N BH MAC" where N counts the requests taken since the hello, BH is the SHA-256 of its
//   body and MAC the HMAC the header comment defines under the session key of the hello the
//   server answered, all computed here apart from control_auth.cc (OpenSSL directly);
// - a genuine request in order is taken, and one with a flipped bit never is;
// - a refusal is final: nothing is taken after it;
// - a client takes a hello's answer only when its proof is the HMAC of the token over CN, SN.
// Run: scripts/fuzz.sh.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <boost/beast/http.hpp>
#include <openssl/sha.h>

#include "control/control_auth.h"
#include "rendezvous/wire.h"

namespace c = etrun::control;
namespace http = boost::beast::http;

namespace {

const std::string kToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string kServerNonce(64, '2');
constexpr uint64_t kLimit = 512;

// Reads the input as a sequence of fields.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(reinterpret_cast<const char*>(data), size) {}
  bool empty() const { return data_.empty(); }
  uint8_t Byte() {
    if (data_.empty()) return 0;
    uint8_t b = static_cast<uint8_t>(data_[0]);
    data_.remove_prefix(1);
    return b;
  }
  // A field of up to 255 (or 255 * 16) bytes, its length first.
  std::string_view Bytes(int scale = 1) {
    size_t n = std::min<size_t>(static_cast<size_t>(Byte()) * static_cast<size_t>(scale), data_.size());
    std::string_view out = data_.substr(0, n);
    data_.remove_prefix(n);
    return out;
  }

 private:
  std::string_view data_;
};

std::string Hex(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : bytes) {
    out += kDigits[ch >> 4];
    out += kDigits[ch & 15];
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return Hex(std::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

// The spec, read apart from control_auth.cc.
std::string Mac(std::string_view key, const std::string& text) {
  return etrun::rendezvous::HmacSha256(key, text);
}

// One connection's server and what the target knows of it.
struct Connection {
  c::ServerAuth server{kToken, kServerNonce, kLimit};
  std::string client_nonce;  // CN of the hello the server answered ("" before)
  uint64_t taken = 0;        // requests taken since it
  bool refused = false;       // the server refused: it must refuse everything after
  bool closed = false;        // answered 411 or 413: the server closed the connection
  std::string answer;        // the Etrun-Auth of the answer to the request taken last

  // Feeds one request; returns whether the server took it (CheckBody true). Checks the
  // invariants on what it took.
  bool Feed(std::string_view method, std::string_view target, std::string_view auth, int64_t length,
            std::string_view body) {
    if (closed) return false;  // nothing arrives on a closed connection
    c::ServerAuth::Verdict v = server.OnHeaders(method, target, auth, length);
    if (v.step == c::ServerAuth::Step::kHello) {
      if (refused || !client_nonce.empty()) abort();  // one hello, before anything else
      std::string_view cn = auth.substr(auth.rfind(' ') + 1);
      if (auth != "v1 hello " + std::string(cn) || method != "POST" || target != "/auth" || length != 0) abort();
      client_nonce = std::string(cn);
      std::string proof = Hex(Mac(kToken, "etrun-auth v1 server\n" + client_nonce + "\n" + kServerNonce));
      if (server.hello_reply() != "v1 " + kServerNonce + " " + proof) abort();
      return false;
    }
    if (v.step == c::ServerAuth::Step::kRefuse) {
      refused = true;
      if (!server.refused()) abort();
      return false;
    }
    if (refused || client_nonce.empty()) abort();  // authenticated after a refusal, or no hello
    if (v.step == c::ServerAuth::Step::kAnswer) {
      if (!(length < 0 || static_cast<uint64_t>(length) > kLimit)) abort();
      CheckTaken(method, target, auth, std::string_view("\x01", 1), /*check_body=*/false);
      if (server.SignAnswer(v.status, "").empty()) abort();
      closed = true;  // the server closes the connection after such an answer
      return false;
    }
    if (length < 0 || static_cast<uint64_t>(length) > kLimit) abort();
    if (!server.CheckBody(body)) {
      refused = true;
      return false;
    }
    CheckTaken(method, target, auth, body, true);
    ++taken;
    answer = server.SignAnswer(200, "{}");
    if (answer.empty()) abort();
    return true;
  }

  void CheckTaken(std::string_view method, std::string_view target, std::string_view auth,
                  std::string_view body, bool check_body) {
    std::string key = Mac(kToken, "etrun-auth v1 session\n" + client_nonce + "\n" + kServerNonce);
    std::string prefix = "v1 " + std::to_string(taken) + " ";
    if (!auth.starts_with(prefix) || auth.size() != prefix.size() + 64 + 1 + 64 || auth[prefix.size() + 64] != ' ') {
      abort();
    }
    std::string hash(auth.substr(prefix.size(), 64));
    if (check_body && hash != Sha256Hex(body)) abort();
    std::string mac = Hex(Mac(key, "etrun-auth v1 request\n" + std::to_string(taken) + "\n" + std::string(method) +
                                       "\n" + std::string(target) + "\n" + hash));
    if (auth.substr(prefix.size() + 65) != mac) abort();
  }
};

// Raw bytes as the server reads them: the headers (up to its limit), then the body they announce.
void FeedRaw(Connection* connection, std::string_view raw) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(4096);
  parser.eager(false);
  boost::beast::error_code ec;
  size_t used = parser.put(boost::asio::buffer(raw.data(), raw.size()), ec);
  if (ec || !parser.is_header_done()) return;  // the server answers 400 or waits: nothing taken
  const auto& request = parser.get();
  int64_t length = parser.chunked() ? -1 : static_cast<int64_t>(parser.content_length().value_or(0));
  std::string_view body = raw.substr(used);
  if (length >= 0) body = body.substr(0, static_cast<size_t>(length));
  auto view = [](boost::beast::string_view text) { return std::string_view(text.data(), text.size()); };
  connection->Feed(view(request.method_string()), view(request.target()), view(request[c::kAuthHeader]),
                   length, body);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  Connection connection;
  // The genuine client's nonce comes from the input too (any 32 bytes).
  std::string nonce = Hex(std::string(in.Bytes()).append(32, '\0').substr(0, 32));
  c::ClientAuth client(kToken, nonce);
  bool client_ready = false;
  uint64_t client_taken = 0;  // the client's requests the server took
  while (!in.empty()) {
    switch (in.Byte() % 4) {
      case 0:
        FeedRaw(&connection, in.Bytes(16));
        break;
      case 1: {  // the client's hello
        bool fresh = !connection.refused && connection.client_nonce.empty();
        connection.Feed("POST", "/auth", client.Hello(), 0, "");
        if (fresh) {
          if (connection.client_nonce != nonce) abort();
          client_ready = client.OnHelloReply(200, connection.server.hello_reply()) == c::ClientAuth::Proof::kOk;
          if (!client_ready) abort();
        }
        break;
      }
      case 2: {  // a signed request, maybe with one bit flipped
        std::string method(in.Bytes()), target(in.Bytes()), body(in.Bytes(4));
        uint8_t flip = in.Byte();
        uint16_t where = static_cast<uint16_t>(in.Byte() << 8 | in.Byte());
        if (!client_ready || method.empty() || target.empty()) break;
        c::ClientAuth signer = client;  // kept only when the server takes the request
        std::string auth = signer.Sign(method, target, body);
        std::string whole = method + target + auth + body;
        bool mutated = flip != 0;
        if (mutated) {
          size_t bit = where % (whole.size() * 8);
          size_t at = bit / 8;
          char flipped = static_cast<char>(whole[at] ^ (1 << (bit % 8)));
          if (at < method.size()) {
            method[at] = flipped;
          } else if ((at -= method.size()) < target.size()) {
            target[at] = flipped;
          } else if ((at -= target.size()) < auth.size()) {
            auth[at] = flipped;
          } else {
            body[at - auth.size()] = flipped;
          }
        }
        bool live = !connection.refused && !connection.closed && connection.taken == client_taken;
        bool taken = connection.Feed(method, target, auth, static_cast<int64_t>(body.size()), body);
        if (mutated && taken) abort();
        if (!mutated && live && body.size() <= kLimit && method.find_first_of("\r\n") == std::string::npos &&
            target.find_first_of("\r\n") == std::string::npos && !taken) {
          abort();  // a genuine request in order is taken
        }
        if (taken) {  // the client takes the server's answer, and counts on with it
          if (!signer.CheckAnswerHeaders(200, connection.answer) || !signer.CheckAnswerBody("{}")) abort();
          client = signer;
          ++client_taken;
        }
        break;
      }
      case 3: {  // a raw text as the answer to a fresh client's hello
        std::string_view text = in.Bytes();
        c::ClientAuth fresh(kToken, nonce);
        if (fresh.OnHelloReply(200, text) == c::ClientAuth::Proof::kOk) {
          std::string_view sn = text.substr(3, 64);
          std::string proof = Hex(Mac(kToken, "etrun-auth v1 server\n" + nonce + "\n" + std::string(sn)));
          if (text != "v1 " + std::string(sn) + " " + proof) abort();
        }
        break;
      }
    }
  }
  return 0;
}
