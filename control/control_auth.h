// How the control endpoints authenticate: a job's (`etrun status`, `list`, `scale`) and a pool's
// (`etrun pool`, `--pool`), both control.h's ControlServer and ControlRequest. A challenge and
// response keyed by the endpoint's token T (its 64 hex digits, as text: the registry file's, or
// ETRUN_POOL_TOKEN), so that the server proves it knows T before the client sends it anything,
// T itself never crosses the wire, and every request and answer is bound to one connection and
// its place on it. The message formats, the MACs and both sides' checks; no sockets (pure).
//
// The exchange, on one TCP connection (HTTP/1.1 kept alive). H = HMAC-SHA256, hex() lower-case
// hex, "\n" one newline byte; every message carries one header, Etrun-Auth:
//
//   1. client -> server   POST /auth, no body         Etrun-Auth: v1 hello CN
//        CN: 32 fresh random bytes (hex). Nothing secret: whoever answers learns a random number.
//   2. server -> client   200, no body                Etrun-Auth: v1 SN PROOF
//        SN: the server's 32 fresh random bytes (hex);
//        PROOF = hex(H(T, "etrun-auth v1 server\n" CN "\n" SN)).
//        The client checks PROOF; if it does not verify, the client closes the connection and
//        sends nothing more (its one error line: the server did not prove it knows the token).
//      Both sides now hold the session key K = H(T, "etrun-auth v1 session\n" CN "\n" SN).
//   3. client -> server   METHOD TARGET, body B        Etrun-Auth: v1 N BH MAC
//        N: the request's number on this connection (0, 1, ...; decimal), BH = hex(SHA-256(B)),
//        MAC = hex(H(K, "etrun-auth v1 request\n" N "\n" METHOD "\n" TARGET "\n" BH)).
//        The server checks it when the headers arrive, before it reads B: a request without it,
//        with another N, or whose MAC does not verify gets 401 and the connection is closed.
//        B is then read (up to the endpoint's limit: 413 past it) and must hash to BH.
//   4. server -> client   STATUS, body R               Etrun-Auth: v1 N RH MAC'
//        RH = hex(SHA-256(R)), MAC' = hex(H(K, "etrun-auth v1 response\n" N "\n" STATUS "\n" RH)).
//        The client takes no answer whose MAC' does not verify (checked at its headers, then RH).
//   Steps 3 and 4 may repeat, N + 1 each time (ControlRequest sends one request per connection).
//
// So: an impostor at the address (a port taken while the pool was down, a reused pid's port in
// the registry) cannot answer step 2 and gets nothing but CN; a captured request verifies on no
// other connection (another CN and SN, another K) and not again on its own (N moved on); a
// changed method, target, body, status or answer is refused. Not provided: secrecy of the
// bodies (plain HTTP: a job's description and its grants can be read on the path). Every field
// has a fixed form (hex of fixed length, decimal, and METHOD and TARGET, which hold no newline),
// so the MACed texts cannot be read two ways.
// Thread-compatible: each object belongs to one connection.
#ifndef ETRUN_CONTROL_CONTROL_AUTH_H_
#define ETRUN_CONTROL_CONTROL_AUTH_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace etrun::control {

inline constexpr char kAuthHeader[] = "Etrun-Auth";
inline constexpr char kAuthMethod[] = "POST";  // the hello's request line
inline constexpr char kAuthTarget[] = "/auth";

// 32 random bytes as 64 lower-case hex digits (a nonce, a token); "" when the system gives no
// random numbers.
std::string RandomHex32();

// The exchange's values, as the header comment defines them (hex where they travel).
std::string BodyHash(std::string_view body);
std::string ServerProof(std::string_view token, std::string_view client_nonce, std::string_view server_nonce);
std::string SessionKey(std::string_view token, std::string_view client_nonce, std::string_view server_nonce);
std::string RequestMac(std::string_view key, uint64_t n, std::string_view method, std::string_view target,
                       std::string_view body_hash);
std::string ResponseMac(std::string_view key, uint64_t n, int status, std::string_view body_hash);

// The server's side of one connection: a state machine over what arrives. A refusal is final:
// every later call refuses too (the caller closes the connection).
class ServerAuth {
 public:
  // `server_nonce`: SN, fresh for this connection (RandomHex32). `max_body`: the endpoint's body
  // limit in bytes.
  ServerAuth(std::string token, std::string server_nonce, uint64_t max_body);

  // What to do with a request whose headers just arrived.
  enum class Step {
    kHello,     // a good hello: answer 200 with hello_reply() as Etrun-Auth, no body
    kReadBody,  // authenticated: read the body (the Content-Length given), then CheckBody
    kRefuse,    // answer `status` (401 or 400) unsigned, read nothing more, close
    kAnswer,    // authenticated but not servable (413 over the limit, 411 no length): answer
                // `status` signed with SignAnswer, read nothing more, close
  };
  struct Verdict {
    Step step = Step::kRefuse;
    int status = 401;
    std::string why;  // for kRefuse and kAnswer: what was wrong, for the answer's body
  };
  // `auth` is the Etrun-Auth value ("" when absent); `body_bytes` the Content-Length (0 when
  // absent), or -1 when the length is not given in advance (chunked).
  Verdict OnHeaders(std::string_view method, std::string_view target, std::string_view auth,
                    int64_t body_bytes);
  const std::string& hello_reply() const { return hello_reply_; }
  // After kReadBody: true when `body` hashes to the headers' BH; false refuses (401, close).
  bool CheckBody(std::string_view body);
  // The Etrun-Auth value of the answer to the request accepted last (after a true CheckBody, or
  // kAnswer); the next request is N + 1. "" when there is no such request.
  std::string SignAnswer(int status, std::string_view body);
  bool refused() const { return state_ == State::kRefused; }

 private:
  enum class State { kNew, kReady, kBody, kAnswer, kRefused };
  Verdict Refuse(int status, std::string why);

  std::string token_;
  std::string server_nonce_;
  uint64_t max_body_;
  State state_ = State::kNew;
  std::string key_;        // K, once the hello is answered
  std::string hello_reply_;
  uint64_t next_ = 0;      // N of the next request
  std::string body_hash_;  // BH of the request being read
};

// The client's side of one connection.
class ClientAuth {
 public:
  // `client_nonce`: CN, fresh for this connection (RandomHex32).
  ClientAuth(std::string token, std::string client_nonce);

  // The hello's Etrun-Auth value.
  std::string Hello() const;
  enum class Proof {
    kOk,     // the server knows the token: requests may follow
    kWrong,  // a well-formed answer with a proof that does not verify (another token)
    kNone,   // no answer of this exchange at all (another program, or no Etrun-Auth)
  };
  // At the hello's answer: its status and Etrun-Auth value ("" when absent).
  Proof OnHelloReply(int status, std::string_view auth);
  // The Etrun-Auth value of the next request. REQUIRES: OnHelloReply returned kOk.
  std::string Sign(std::string_view method, std::string_view target, std::string_view body);
  // At the answer's headers: whether it is signed for the request sent last; then, once its
  // body is in, whether that hashes as signed (which completes the request).
  bool CheckAnswerHeaders(int status, std::string_view auth);
  bool CheckAnswerBody(std::string_view body);

 private:
  std::string token_;
  std::string client_nonce_;
  std::string key_;  // K, once the proof verified
  uint64_t next_ = 0;
  bool sent_ = false;      // a request is waiting for its answer
  std::string answer_hash_;
};

}  // namespace etrun::control

#endif  // ETRUN_CONTROL_CONTROL_AUTH_H_
