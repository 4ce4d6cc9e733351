// The control endpoints' exchange (control/control_auth.h) without sockets: a client and a
// server that share the token agree; a server without it cannot prove itself; every part of a
// request and of an answer is covered (one changed field is refused, a refusal is final); a
// captured request is refused on its own connection and on another; the values are pinned to
// ones computed apart (Python's hmac and hashlib), so the header comment is the spec.
#include "control/control_auth.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

using etrun::control::ClientAuth;
using etrun::control::ServerAuth;
namespace auth = etrun::control;

namespace {

const std::string kToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string kClientNonce(64, '1');  // hex "1111..." as CN
const std::string kServerNonce(64, '2');
constexpr uint64_t kLimit = 1024;

using Step = ServerAuth::Step;

// A client and a server after a good hello.
struct Session {
  ClientAuth client{kToken, kClientNonce};
  ServerAuth server{kToken, kServerNonce, kLimit};
  Session() {
    ServerAuth::Verdict v = server.OnHeaders("POST", "/auth", client.Hello(), 0);
    REQUIRE(v.step == Step::kHello);
    REQUIRE(client.OnHelloReply(200, server.hello_reply()) == ClientAuth::Proof::kOk);
  }
};

// One request through the server: its verdict's step, then (read) whether the body checked.
struct Sent {
  Step step;
  bool body_ok = false;
};
Sent Send(ServerAuth* server, const std::string& method, const std::string& target,
          const std::string& header, const std::string& body) {
  ServerAuth::Verdict v = server->OnHeaders(method, target, header, static_cast<int64_t>(body.size()));
  Sent out{v.step};
  if (v.step == Step::kReadBody) out.body_ok = server->CheckBody(body);
  return out;
}

}  // namespace

TEST_CASE("control auth: the values are the spec's, computed apart") {
  // Given T, CN = 0x11.., SN = 0x22..: PROOF, and the MACs of POST /jobs "{}" (N 0) and of its
  // answer 200 {"ok":true}, as Python's hmac.new(...).hexdigest() gives them.
  CHECK(auth::ServerProof(kToken, kClientNonce, kServerNonce) ==
        "8e28d0920649c1d6835d23d3b05b0d3c7956a175f45e021cb8b809cbda4e4bfb");
  std::string key = auth::SessionKey(kToken, kClientNonce, kServerNonce);
  std::string body_hash = auth::BodyHash("{}");
  CHECK(body_hash == "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
  CHECK(auth::RequestMac(key, 0, "POST", "/jobs", body_hash) ==
        "0921721597f6e6088f51f02043194533fc5105b8906b77fcbac2d0e97cec5a0f");
  CHECK(auth::ResponseMac(key, 0, 200, auth::BodyHash(R"({"ok":true})")) ==
        "bdf49e54039e0343586060316a38f653902cc0ec560e4dab7d25110002a29a76");
  Session s;
  CHECK(s.server.hello_reply() == "v1 " + kServerNonce + " 8e28d0920649c1d6835d23d3b05b0d3c7956a175f45e021cb8b809cbda4e4bfb");
  CHECK(s.client.Sign("POST", "/jobs", "{}") ==
        "v1 0 " + body_hash + " 0921721597f6e6088f51f02043194533fc5105b8906b77fcbac2d0e97cec5a0f");
}

TEST_CASE("control auth: a request and its answer go through, then the next one") {
  // Given a session, requests 0 and 1 are accepted and both answers verify at the client.
  Session s;
  for (const std::string body : {R"({"live":{}})", ""}) {
    CAPTURE(body);
    std::string header = s.client.Sign("POST", "/jobs/a/sync", body);
    Sent sent = Send(&s.server, "POST", "/jobs/a/sync", header, body);
    CHECK(sent.step == Step::kReadBody);
    CHECK(sent.body_ok);
    std::string answer = R"({"hosts":[]})";
    std::string signature = s.server.SignAnswer(200, answer);
    CHECK(s.client.CheckAnswerHeaders(200, signature));
    CHECK(s.client.CheckAnswerBody(answer));
  }
}

TEST_CASE("control auth: a server without the token cannot prove itself") {
  // Given a listener that does not know T (another token, another program), the client learns
  // so from the hello's answer, before it sends anything but CN.
  ClientAuth client(kToken, kClientNonce);
  CHECK(client.Hello() == "v1 hello " + kClientNonce);
  ServerAuth other(std::string(64, 'f'), kServerNonce, kLimit);
  REQUIRE(other.OnHeaders("POST", "/auth", client.Hello(), 0).step == Step::kHello);
  CHECK(client.OnHelloReply(200, other.hello_reply()) == ClientAuth::Proof::kWrong);
  CHECK(client.Sign("GET", "/status", "").empty());  // nothing to sign with
  ServerAuth real(kToken, kServerNonce, kLimit);
  REQUIRE(real.OnHeaders("POST", "/auth", client.Hello(), 0).step == Step::kHello);
  std::string good = real.hello_reply();
  struct Case {
    int status;
    std::string header;
    ClientAuth::Proof proof;
  };
  const Case cases[] = {
      {200, "", ClientAuth::Proof::kNone},                       // a plain HTTP server
      {401, good, ClientAuth::Proof::kNone},                     // not a hello's answer
      {200, "v1 " + kServerNonce, ClientAuth::Proof::kNone},     // no proof
      {200, good + " x", ClientAuth::Proof::kNone},
      {200, "v2" + good.substr(2), ClientAuth::Proof::kNone},
      {200, good.substr(0, good.size() - 1) + "A", ClientAuth::Proof::kNone},  // not lower hex
      {200, "v1 " + std::string(64, '3') + good.substr(67), ClientAuth::Proof::kWrong},  // other SN
      {200, good.substr(0, good.size() - 1) + (good.back() == '0' ? "1" : "0"), ClientAuth::Proof::kWrong},
      {200, good, ClientAuth::Proof::kOk},
  };
  for (const Case& c : cases) {
    CAPTURE(c.header);
    ClientAuth fresh(kToken, kClientNonce);
    CHECK(fresh.OnHelloReply(c.status, c.header) == c.proof);
  }
}

TEST_CASE("control auth: the server takes nothing before a good hello") {
  // Given a new connection, only `POST /auth` with a hello and no body opens a session; anything
  // else is refused, and a refused connection refuses everything after.
  struct Case {
    std::string method, target, header;
    int64_t body;
    int status;
    std::string why;
  };
  const Case cases[] = {
      {"GET", "/status", "", 0, 401, "no Etrun-Auth"},
      {"GET", "/status", "Bearer " + kToken, 0, 401, "the token itself (the old scheme)"},
      {"POST", "/jobs", "v1 0 " + std::string(64, 'a') + " " + std::string(64, 'b'), 2, 401, "a request before the hello"},
      {"POST", "/auth", "v1 hello " + kClientNonce.substr(1), 0, 401, "a short nonce"},
      {"POST", "/auth", "v1 hello  " + kClientNonce, 0, 401, "two spaces"},
      {"GET", "/auth", "v1 hello " + kClientNonce, 0, 400, "a hello that is no POST"},
      {"POST", "/status", "v1 hello " + kClientNonce, 0, 400, "a hello elsewhere"},
      {"POST", "/auth", "v1 hello " + kClientNonce, 5, 400, "a hello with a body"},
      {"POST", "/auth", "v1 hello " + kClientNonce, -1, 400, "a chunked hello"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.why);
    ServerAuth server(kToken, kServerNonce, kLimit);
    ServerAuth::Verdict v = server.OnHeaders(c.method, c.target, c.header, c.body);
    CHECK(v.step == Step::kRefuse);
    CHECK(v.status == c.status);
    CHECK(server.refused());
    CHECK(server.OnHeaders("POST", "/auth", "v1 hello " + kClientNonce, 0).step == Step::kRefuse);
    CHECK(server.SignAnswer(200, "").empty());
  }
  ServerAuth no_token("", kServerNonce, kLimit);
  CHECK(no_token.OnHeaders("POST", "/auth", "v1 hello " + kClientNonce, 0).step == Step::kRefuse);
}

TEST_CASE("control auth: every part of a request is covered") {
  // Given a request signed for POST /jobs/a/sync with a body, the server refuses it (401, at
  // its headers unless only the body changed) when any one part differs from what was signed.
  const std::string method = "POST", target = "/jobs/a/sync", body = R"({"live":{"h":[0]}})";
  struct Case {
    std::string why;
    std::string method, target, body;
    bool flip_mac = false, other_hash = false, other_number = false;
    bool refused_at_headers = true;
  };
  const Case cases[] = {
      {"the method", "PUT", target, body},
      {"the target", method, "/jobs/b/sync", body},
      {"the query", method, target + "?x", body},
      {"the body", method, target, R"({"live":{"h":[1]}})", false, false, false, false},
      {"the body's length", method, target, body + " ", false, false, false, false},
      {"one bit of the MAC", method, target, body, true},
      {"the stated body hash", method, target, body, false, true},
      {"the request number", method, target, body, false, false, true},
      {"a line break in the target", method, target + "\nx", body},
  };
  for (const Case& c : cases) {
    CAPTURE(c.why);
    Session s;
    std::string header = s.client.Sign(method, target, body);
    if (c.flip_mac) header.back() = header.back() == '0' ? '1' : '0';
    if (c.other_hash) header.replace(5, 64, auth::BodyHash(c.body + "x"));
    if (c.other_number) header.replace(3, 1, "1");
    ServerAuth::Verdict v = s.server.OnHeaders(c.method, c.target, header, static_cast<int64_t>(c.body.size()));
    if (c.refused_at_headers) {
      CHECK(v.step == Step::kRefuse);
      CHECK(v.status == (c.why.starts_with("a line break") ? 400 : 401));
    } else {
      REQUIRE(v.step == Step::kReadBody);
      CHECK_FALSE(s.server.CheckBody(c.body));
    }
    CHECK(s.server.refused());
    // The genuine request does not get through after a refusal either.
    CHECK(Send(&s.server, method, target, header, body).step == Step::kRefuse);
  }
}

TEST_CASE("control auth: a captured request is not taken again") {
  // Given request 0 of one session, sent again on it after its answer, or on another session
  // (another CN and SN) as its first request, the server refuses it.
  Session a;
  std::string header = a.client.Sign("POST", "/stop", "");
  REQUIRE(Send(&a.server, "POST", "/stop", header, "").body_ok);
  REQUIRE_FALSE(a.server.SignAnswer(200, "{}").empty());
  ServerAuth::Verdict again = a.server.OnHeaders("POST", "/stop", header, 0);
  CHECK(again.step == Step::kRefuse);
  CHECK(again.why == "request number 0, expected 1 (a replay?)");

  ClientAuth client(kToken, std::string(64, '4'));
  ServerAuth b(kToken, std::string(64, '5'), kLimit);
  REQUIRE(b.OnHeaders("POST", "/auth", client.Hello(), 0).step == Step::kHello);
  REQUIRE(client.OnHelloReply(200, b.hello_reply()) == ClientAuth::Proof::kOk);
  CHECK(b.OnHeaders("POST", "/stop", header, 0).step == Step::kRefuse);

  // The same CN with a fresh SN (a replayed hello, then the captured request): refused too.
  ServerAuth c(kToken, std::string(64, '6'), kLimit);
  REQUIRE(c.OnHeaders("POST", "/auth", "v1 hello " + kClientNonce, 0).step == Step::kHello);
  CHECK(c.OnHeaders("POST", "/stop", header, 0).step == Step::kRefuse);
  // A second hello on an open session is refused.
  Session d;
  CHECK(d.server.OnHeaders("POST", "/auth", "v1 hello " + kClientNonce, 0).step == Step::kRefuse);
}

TEST_CASE("control auth: every part of an answer is covered") {
  // Given an answer signed for 200 and a body, the client refuses it when the status, the
  // body, the number or the MAC differs, or when it answers no request of its.
  const std::string body = R"({"ok":true})";
  struct Case {
    std::string why;
    int status;
    std::string body;
    bool flip_mac = false, other_number = false;
    bool headers_ok = false;
  };
  const Case cases[] = {
      {"the status", 500, body},
      {"one bit of the MAC", 200, body, true},
      {"the number", 200, body, false, true},
      {"the body", 200, R"({"ok":false})", false, false, true},
  };
  for (const Case& c : cases) {
    CAPTURE(c.why);
    Session s;
    std::string header = s.client.Sign("POST", "/stop", "");
    REQUIRE(Send(&s.server, "POST", "/stop", header, "").body_ok);
    std::string signature = s.server.SignAnswer(200, body);
    if (c.flip_mac) signature.back() = signature.back() == '0' ? '1' : '0';
    if (c.other_number) signature.replace(3, 1, "1");
    CHECK(s.client.CheckAnswerHeaders(c.status, signature) == c.headers_ok);
    if (c.headers_ok) CHECK_FALSE(s.client.CheckAnswerBody(c.body));
  }
  // An answer before any request: nothing to check it against.
  Session s;
  CHECK_FALSE(s.client.CheckAnswerHeaders(200, "v1 0 " + auth::BodyHash("") + " " + std::string(64, '0')));
}

TEST_CASE("control auth: a body over the limit or of no stated length is answered unread") {
  // Given an authenticated request whose Content-Length passes the limit (or is chunked), the
  // server answers 413 (411) signed, before reading it; the client verifies that answer.
  for (int64_t length : {static_cast<int64_t>(kLimit) + 1, int64_t{-1}}) {
    CAPTURE(length);
    Session s;
    std::string body(length < 0 ? 10 : static_cast<size_t>(length), 'x');
    ServerAuth::Verdict v = s.server.OnHeaders("POST", "/jobs", s.client.Sign("POST", "/jobs", body), length);
    CHECK(v.step == Step::kAnswer);
    CHECK(v.status == (length < 0 ? 411 : 413));
    std::string answer = R"({"error":"too big"})";
    std::string signature = s.server.SignAnswer(v.status, answer);
    CHECK(s.client.CheckAnswerHeaders(v.status, signature));
    CHECK(s.client.CheckAnswerBody(answer));
  }
  Session s;
  std::string body(kLimit, 'x');  // at the limit: read
  CHECK(Send(&s.server, "POST", "/jobs", s.client.Sign("POST", "/jobs", body), body).body_ok);
}

TEST_CASE("control auth: nonces are fresh 32-byte values") {
  std::string a = auth::RandomHex32(), b = auth::RandomHex32();
  CHECK(a.size() == 64);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a != b);
}
