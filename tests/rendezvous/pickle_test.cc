// The pickles Horovod's driver and workers exchange (spec §4.4, §5.6-5.8): the spec's vectors,
// vectors from real CPython, and what the reader must refuse (§9.12).
//
// "CPython" vectors were made at development time with Debian's /usr/bin/python3 (3.11.2) and
// stub modules on PYTHONPATH shaped like Horovod's:
//   horovod/runner/common/util/network.py:
//     class PingRequest: pass
//     class PingResponse:
//       def __init__(self, service_name, source_address): (store both as attributes)
//     class AckResponse: pass
//   horovod/runner/elastic/worker.py:
//     class HostUpdateResult(enum.IntFlag): no_update = 0; removed = 1; added = 2; mixed = 3
//     class HostsUpdatedRequest:
//       def __init__(self, timestamp, res): (store both as attributes)
// then `pickle.dumps(obj, protocol=N).hex()` (cloudpickle writes the same bytes). "Value form"
// vectors add `HostUpdateResult.__reduce_ex__ = lambda self, proto: (type(self), (self._value_,))`,
// which is what CPython <= 3.10 and >= 3.11.5 do; "name form" ones use 3.11.2's enum pickling.
// Strings are built at run time so that CPython memoizes none of them twice, as with a real
// worker's psutil results.
#include "rendezvous/pickle.h"

#include <doctest/doctest.h>

#include "tests/rendezvous/hex_test_util.h"
#include <openssl/evp.h>

#include <functional>

using etrun::rendezvous::Base64Decode;
using etrun::rendezvous::Base64Encode;
using etrun::rendezvous::DecodeAckResponse;
using etrun::rendezvous::DecodeHostsUpdatedRequest;
using etrun::rendezvous::DecodePingRequest;
using etrun::rendezvous::DecodePingResponse;
using etrun::rendezvous::DecodeWorkerAddresses;
using etrun::rendezvous::DecodeWorkerAddressesBody;
using etrun::rendezvous::EncodeAckResponse;
using etrun::rendezvous::EncodeHostsUpdatedRequest;
using etrun::rendezvous::EncodePingRequest;
using etrun::rendezvous::EncodePingResponse;
using etrun::rendezvous::EncodeWorkerAddresses;
using etrun::rendezvous::EncodeWorkerAddressesBody;
using etrun::rendezvous::HostUpdateResult;
using etrun::rendezvous::InterfaceAddresses;
using etrun::rendezvous::WorkerAddresses;

namespace {

using etrun::testing::Hex;
using etrun::testing::Unhex;

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  REQUIRE(EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) == 1);
  return Hex(std::string_view(reinterpret_cast<const char*>(digest), length));
}

// bytes(range(32)), the spec's key.
std::string Key() {
  std::string key;
  for (int i = 0; i < 32; ++i) key.push_back(static_cast<char>(i));
  return key;
}

// The same pickle with PROTO 4 instead of 5.
std::string Proto4(std::string pickle) {
  pickle[1] = 4;
  return pickle;
}

// ---- Spec §5.7 (CPython 3.11.7, protocol 5).
const std::string kPingRequest = Unhex(
    "80059539000000000000008c22686f726f766f642e72756e6e65722e636f6d6d6f6e2e7574696c2e6e6574776f72"
    "6b948c0b50696e67526571756573749493942981942e");
const std::string kPingResponse = Unhex(
    "80059589000000000000008c22686f726f766f642e72756e6e65722e636f6d6d6f6e2e7574696c2e6e6574776f72"
    "6b948c0c50696e67526573706f6e73659493942981947d94288c0c736572766963655f6e616d65948c1b776f726b"
    "6572206e6f74696669636174696f6e2073657276696365948c0e736f757263655f61646472657373948c09313237"
    "2e302e302e319475622e");
const std::string kAckResponse = Unhex(
    "80059539000000000000008c22686f726f766f642e72756e6e65722e636f6d6d6f6e2e7574696c2e6e6574776f72"
    "6b948c0b41636b526573706f6e73659493942981942e");
const std::string kHostsAdded = Unhex(
    "80059575000000000000008c1d686f726f766f642e72756e6e65722e656c61737469632e776f726b6572948c1348"
    "6f73747355706461746564526571756573749493942981947d94288c0974696d657374616d70944a00f153658c03"
    "7265739468008c10486f7374557064617465526573756c749493944b028594529475622e");
const std::string kHostsMixed = Unhex(
    "80059575000000000000008c1d686f726f766f642e72756e6e65722e656c61737469632e776f726b6572948c1348"
    "6f73747355706461746564526571756573749493942981947d94288c0974696d657374616d70944a00f153658c03"
    "7265739468008c10486f7374557064617465526573756c749493944b038594529475622e");
const std::string kNameFormMixed = Unhex(
    "800595bc000000000000008c1d686f726f766f642e72756e6e65722e656c61737469632e776f726b6572948c1348"
    "6f73747355706461746564526571756573749493942981947d94288c0974696d657374616d70944a00f153658c03"
    "726573948c095f6f70657261746f72948c036f725f9493948c086275696c74696e73948c07676574617474729493"
    "9468008c10486f7374557064617465526573756c749493948c0561646465649486945294680c680e8c0772656d6f"
    "76656494869452948694529475622e");
const std::string kAddressesSingle = Unhex(
    "80059542000000000000007d948c026c6f945d948c093132372e302e302e31944d409c8694617343200001020304"
    "05060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f9486942e");
const std::string kAddressesMulti = Unhex(
    "8005956e000000000000007d94288c026c6f945d948c093132372e302e302e31944d409c8694618c046574683094"
    "5d94288c0831302e302e302e35944d409c86948c0831302e302e302e36944d409c86946575432000010203040506"
    "0708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f9486942e");
const char kAddressesBody[] =
    "gAWVQgAAAAAAAAB9lIwCbG+UXZSMCTEyNy4wLjAuMZRNQJyGlGFz"
    "QyAAAQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eH5SGlC4=";
// The spec gives only the tail of the 157-byte name-form `added`; this is the whole of it
// (CPython 3.11.2, protocol 5); the test checks the tail.
const std::string kNameFormAdded = Unhex(
    "80059592000000000000008c1d686f726f766f642e72756e6e65722e656c61737469632e776f726b6572948c1348"
    "6f73747355706461746564526571756573749493942981947d94288c0974696d657374616d70944a00f153658c03"
    "726573948c086275696c74696e73948c076765746174747294939468008c10486f7374557064617465526573756c"
    "749493948c056164646564948694529475622e");
const char kNameFormAddedTail[] =
    "8c03726573948c086275696c74696e73948c076765746174747294939468008c10486f7374557064617465526573"
    "756c749493948c056164646564948694529475622e";

// ---- CPython 3.11.2 (see the top of the file).
// Name form, protocol 5: HostsUpdatedRequest(1700000000, no_update) and (..., removed).
const std::string kNameFormNoUpdate = Unhex(
    "80059596000000000000008c1d686f726f766f642e72756e6e65722e656c61737469632e776f726b6572948c1348"
    "6f73747355706461746564526571756573749493942981947d94288c0974696d657374616d70944a00f153658c03"
    "726573948c086275696c74696e73948c076765746174747294939468008c10486f7374557064617465526573756c"
    "749493948c096e6f5f757064617465948694529475622e");
const std::string kNameFormRemoved = Unhex(
    "80059594000000000000008c1d686f726f766f642e72756e6e65722e656c61737469632e776f726b6572948c1348"
    "6f73747355706461746564526571756573749493942981947d94288c0974696d657374616d70944a00f153658c03"
    "726573948c086275696c74696e73948c076765746174747294939468008c10486f7374557064617465526573756c"
    "749493948c0772656d6f766564948694529475622e");
// Protocol 2 (GLOBAL, BINPUT, BINUNICODE, no FRAME), value form.
const std::string kP2HostsAdded = Unhex(
    "800263686f726f766f642e72756e6e65722e656c61737469632e776f726b65720a486f7374735570646174656452"
    "6571756573740a7100298171017d710228580900000074696d657374616d7071034a00f153655803000000726573"
    "710463686f726f766f642e72756e6e65722e656c61737469632e776f726b65720a486f7374557064617465526573"
    "756c740a71054b0285710652710775622e");
const std::string kP2PingResponse = Unhex(
    "800263686f726f766f642e72756e6e65722e636f6d6d6f6e2e7574696c2e6e6574776f726b0a50696e6752657370"
    "6f6e73650a7100298171017d710228580c000000736572766963655f6e616d657103581b000000776f726b657220"
    "6e6f74696669636174696f6e20736572766963657104580e000000736f757263655f616464726573737105580900"
    "00003132372e302e302e31710675622e");
const std::string kP2PingRequest = Unhex(
    "800263686f726f766f642e72756e6e65722e636f6d6d6f6e2e7574696c2e6e6574776f726b0a50696e6752657175"
    "6573740a7100298171012e");
// Protocol 5, HostsUpdatedRequest(1700000000, 3): a plain int res.
const std::string kPlainIntRes = Unhex(
    "8005955a000000000000008c1d686f726f766f642e72756e6e65722e656c61737469632e776f726b6572948c1348"
    "6f73747355706461746564526571756573749493942981947d94288c0974696d657374616d70944a00f153658c03"
    "726573944b0375622e");
// Protocol 4 and 3, ({'docker0': [], 'lo': [('127.0.0.1', 40000)], 'wlän0': [('192.168.1.20', 80),
// ('192.168.1.21', 1024), ('192.168.1.22', 65535)]}, bytes(range(32))).
const std::string kThreeInterfacesP4 = Unhex(
    "80049597000000000000007d94288c07646f636b657230945d948c026c6f945d948c093132372e302e302e31944d"
    "409c8694618c06776cc3a46e30945d94288c0c3139322e3136382e312e3230944b5086948c0c3139322e3136382e"
    "312e3231944d000486948c0c3139322e3136382e312e3232944dffff869465754320000102030405060708090a0b"
    "0c0d0e0f101112131415161718191a1b1c1d1e1f9486942e");
const std::string kThreeInterfacesP3 = Unhex(
    "80037d7100285807000000646f636b65723071015d710258020000006c6f71035d710458090000003132372e302e"
    "302e3171054d409c867106615806000000776cc3a46e3071075d710828580c0000003139322e3136382e312e3230"
    "71094b5086710a580c0000003139322e3136382e312e3231710b4d000486710c580c0000003139322e3136382e31"
    "2e3232710d4dffff86710e65754320000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e"
    "1f710f8671102e");
// Protocol 4, ({}, bytes(range(32))).
const std::string kEmptyAddresses = Unhex(
    "80049528000000000000007d944320000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e"
    "1f9486942e");

const WorkerAddresses kThreeInterfaces = {
    {"docker0", {}},
    {"lo", {{"127.0.0.1", 40000}}},
    {"wl\xc3\xa4n0", {{"192.168.1.20", 80}, {"192.168.1.21", 1024}, {"192.168.1.22", 65535}}},
};

// The same dict as this Python, `big`, pickled as (big, bytes(range(32))) at protocol 4:
//   big = {}
//   for k in range(1000):
//     name = 'n' * 65536 if k == 500 else 'if%d' % k
//     count = 1001 if k == 7 else k % 4
//     big[name] = [('10.%d.%d.%d' % (k // 256, k % 256, j % 256), 1 + (k * 131 + j * 7) % 65535)
//                  for j in range(count)]
// It has 1000 interfaces (CPython then writes an empty trailing MARK SETITEMS batch), one with 1001
// addresses (two MARK...APPENDS batches), one with a 65536-byte name (written outside any FRAME),
// and makes 120614 bytes in all (several FRAMEs).
WorkerAddresses BigAddresses() {
  WorkerAddresses out;
  for (int k = 0; k < 1000; ++k) {
    InterfaceAddresses entry{k == 500 ? std::string(65536, 'n') : "if" + std::to_string(k), {}};
    int count = k == 7 ? 1001 : k % 4;
    for (int j = 0; j < count; ++j) {
      entry.addresses.push_back({"10." + std::to_string(k / 256) + "." + std::to_string(k % 256) +
                                     "." + std::to_string(j % 256),
                                 1 + (k * 131 + j * 7) % 65535});
    }
    out.push_back(std::move(entry));
  }
  return out;
}

// ---- Decoders under one signature, for tables.
using Decoder = std::function<bool(std::string_view, std::string*)>;

bool AsPingRequest(std::string_view bytes, std::string* err) {
  return DecodePingRequest(bytes, err);
}
bool AsPingResponse(std::string_view bytes, std::string* err) {
  std::string service, source;
  return DecodePingResponse(bytes, &service, &source, err);
}
bool AsAckResponse(std::string_view bytes, std::string* err) {
  return DecodeAckResponse(bytes, err);
}
bool AsHostsUpdated(std::string_view bytes, std::string* err) {
  int64_t timestamp = 0;
  HostUpdateResult res{};
  return DecodeHostsUpdatedRequest(bytes, &timestamp, &res, err);
}
bool AsAddresses(std::string_view bytes, std::string* err) {
  WorkerAddresses addresses;
  std::string key;
  return DecodeWorkerAddresses(bytes, &addresses, &key, err);
}

struct ValidPickle {
  const char* name;
  std::string bytes;
  Decoder decode;
};

std::vector<ValidPickle> ValidPickles() {
  return {
      {"PingRequest", kPingRequest, AsPingRequest},
      {"PingResponse", kPingResponse, AsPingResponse},
      {"AckResponse", kAckResponse, AsAckResponse},
      {"HostsUpdatedRequest added", kHostsAdded, AsHostsUpdated},
      {"name-form removed|added", kNameFormMixed, AsHostsUpdated},
      {"protocol-2 HostsUpdatedRequest", kP2HostsAdded, AsHostsUpdated},
      {"protocol-2 PingResponse", kP2PingResponse, AsPingResponse},
      {"plain int res", kPlainIntRes, AsHostsUpdated},
      {"single-interface addresses", kAddressesSingle, AsAddresses},
      {"multi-interface addresses", kAddressesMulti, AsAddresses},
      {"protocol-3 three interfaces", kThreeInterfacesP3, AsAddresses},
  };
}

}  // namespace

TEST_CASE("the spec's protocol-5 vectors decode to the objects they were made from") {
  std::string err, service, source, key;
  int64_t timestamp = 0;
  HostUpdateResult res{};
  WorkerAddresses addresses;
  CHECK(DecodePingRequest(kPingRequest, &err));
  CHECK(DecodeAckResponse(kAckResponse, &err));
  REQUIRE(DecodePingResponse(kPingResponse, &service, &source, &err));
  CHECK(service == "worker notification service");
  CHECK(source == "127.0.0.1");
  REQUIRE(DecodeHostsUpdatedRequest(kHostsAdded, &timestamp, &res, &err));
  CHECK(timestamp == 1700000000);
  CHECK(res == HostUpdateResult::kAdded);
  REQUIRE(DecodeHostsUpdatedRequest(kHostsMixed, &timestamp, &res, &err));
  CHECK(res == HostUpdateResult::kMixed);
  REQUIRE(DecodeWorkerAddresses(kAddressesSingle, &addresses, &key, &err));
  CHECK(addresses == WorkerAddresses{{"lo", {{"127.0.0.1", 40000}}}});
  CHECK(key == Key());
  REQUIRE(DecodeWorkerAddresses(kAddressesMulti, &addresses, &key, &err));
  CHECK(addresses == WorkerAddresses{{"lo", {{"127.0.0.1", 40000}}},
                                     {"eth0", {{"10.0.0.5", 40000}, {"10.0.0.6", 40000}}}});
  CHECK(key == Key());
}

TEST_CASE("the HTTP body of PUT /worker_addresses decodes like the pickle it encodes") {
  // Given the base64 body the real worker sent (spec 4.4), with and without a trailing newline.
  for (std::string body : {std::string(kAddressesBody), std::string(kAddressesBody) + "\n"}) {
    WorkerAddresses addresses;
    std::string key, err, raw;
    REQUIRE(DecodeWorkerAddressesBody(body, &addresses, &key, &err));
    CHECK(addresses == WorkerAddresses{{"lo", {{"127.0.0.1", 40000}}}});
    CHECK(key == Key());
    REQUIRE(Base64Decode(body, &raw, &err));
    CHECK(raw == kAddressesSingle);
  }
  CHECK(Base64Encode(kAddressesSingle) == kAddressesBody);
  CHECK(EncodeWorkerAddressesBody({{"lo", {{"127.0.0.1", 40000}}}}, Key()) ==
        Base64Encode(Proto4(kAddressesSingle)));
}

TEST_CASE("the writer's protocol-4 output is the spec's protocol-5 vector with byte 1 = 04") {
  const WorkerAddresses multi = {{"lo", {{"127.0.0.1", 40000}}},
                                 {"eth0", {{"10.0.0.5", 40000}, {"10.0.0.6", 40000}}}};
  struct Case {
    const char* name;
    std::string written, spec_vector;
  };
  const Case cases[] = {
      {"PingRequest", EncodePingRequest(), kPingRequest},
      {"PingResponse", EncodePingResponse("worker notification service", "127.0.0.1"),
       kPingResponse},
      {"AckResponse", EncodeAckResponse(), kAckResponse},
      {"added", EncodeHostsUpdatedRequest(1700000000, HostUpdateResult::kAdded), kHostsAdded},
      {"mixed", EncodeHostsUpdatedRequest(1700000000, HostUpdateResult::kMixed), kHostsMixed},
      {"single interface", EncodeWorkerAddresses({{"lo", {{"127.0.0.1", 40000}}}}, Key()),
       kAddressesSingle},
      {"multi interface", EncodeWorkerAddresses(multi, Key()), kAddressesMulti},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    CHECK(static_cast<uint8_t>(c.written[1]) == 4);
    CHECK(Hex(c.written) == Hex(Proto4(c.spec_vector)));
  }
}

TEST_CASE("name-form HostUpdateResults (CPython 3.11.0-3.11.4) decode to their values") {
  CHECK(Hex(kNameFormAdded).ends_with(kNameFormAddedTail));
  CHECK(kNameFormAdded.size() == 157);
  CHECK(kNameFormMixed.size() == 199);
  struct Case {
    const char* name;
    std::string pickle;
    HostUpdateResult res;
  };
  const Case cases[] = {
      {"no_update", kNameFormNoUpdate, HostUpdateResult::kNoUpdate},
      {"removed", kNameFormRemoved, HostUpdateResult::kRemoved},
      {"added", kNameFormAdded, HostUpdateResult::kAdded},
      {"or_(added, removed)", kNameFormMixed, HostUpdateResult::kMixed},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    int64_t timestamp = 0;
    HostUpdateResult res{};
    std::string err;
    REQUIRE_MESSAGE(DecodeHostsUpdatedRequest(c.pickle, &timestamp, &res, &err), err);
    CHECK(timestamp == 1700000000);
    CHECK(res == c.res);
  }
}

TEST_CASE("timestamps take CPython's smallest int opcode, LONG1 from 2^31 on") {
  // Protocol-4 CPython vectors of HostsUpdatedRequest(t, added); only the timestamp bytes vary.
  const std::string prefix =
      "8c1d686f726f766f642e72756e6e65722e656c61737469632e776f726b6572948c13486f737473557064617465"
      "64526571756573749493942981947d94288c0974696d657374616d7094";
  const std::string suffix =
      "8c037265739468008c10486f7374557064617465526573756c749493944b028594529475622e";
  struct Case {
    int64_t timestamp;
    const char* frame_length;
    const char* int_opcode;
  };
  const Case cases[] = {
      {0, "72", "4b00"},
      {255, "72", "4bff"},
      {256, "73", "4d0001"},
      {65535, "73", "4dffff"},
      {65536, "75", "4a00000100"},
      {2147483647, "75", "4affffff7f"},
      {2147483648, "77", "8a050000008000"},
      {4294967296, "77", "8a050000000001"},
      {INT64_MAX, "7a", "8a08ffffffffffffff7f"},
      {-1, "75", "4affffffff"},
      {-2147483648LL, "75", "4a00000080"},
      {-2147483649LL, "77", "8a05ffffff7fff"},
      {INT64_MIN, "7a", "8a080000000000000080"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.timestamp);
    std::string expected =
        std::string("800495") + c.frame_length + "00000000000000" + prefix + c.int_opcode + suffix;
    std::string written = EncodeHostsUpdatedRequest(c.timestamp, HostUpdateResult::kAdded);
    CHECK(Hex(written) == expected);
    int64_t timestamp = 0;
    HostUpdateResult res{};
    std::string err;
    REQUIRE_MESSAGE(DecodeHostsUpdatedRequest(Unhex(expected), &timestamp, &res, &err), err);
    CHECK(timestamp == c.timestamp);
    CHECK(res == HostUpdateResult::kAdded);
  }
}

TEST_CASE("every HostUpdateResult is written in value form with its value byte") {
  // CPython protocol 4, value form: only byte 120 (the BININT1 operand) differs.
  for (int value = 0; value <= 3; ++value) {
    CAPTURE(value);
    std::string expected = Proto4(kHostsAdded);
    expected[120] = static_cast<char>(value);
    auto res = static_cast<HostUpdateResult>(value);
    CHECK(Hex(EncodeHostsUpdatedRequest(1700000000, res)) == Hex(expected));
    HostUpdateResult decoded{};
    int64_t timestamp = 0;
    std::string err;
    REQUIRE(DecodeHostsUpdatedRequest(expected, &timestamp, &decoded, &err));
    CHECK(decoded == res);
  }
}

TEST_CASE("protocol-2 pickles (GLOBAL, BINPUT, BINUNICODE, no FRAME) decode") {
  std::string err, service, source;
  int64_t timestamp = 0;
  HostUpdateResult res{};
  CHECK(DecodePingRequest(kP2PingRequest, &err));
  REQUIRE(DecodePingResponse(kP2PingResponse, &service, &source, &err));
  CHECK(service == "worker notification service");
  CHECK(source == "127.0.0.1");
  REQUIRE(DecodeHostsUpdatedRequest(kP2HostsAdded, &timestamp, &res, &err));
  CHECK(timestamp == 1700000000);
  CHECK(res == HostUpdateResult::kAdded);
}

TEST_CASE("a plain int res decodes as that flag") {
  int64_t timestamp = 0;
  HostUpdateResult res{};
  std::string err;
  REQUIRE(DecodeHostsUpdatedRequest(kPlainIntRes, &timestamp, &res, &err));
  CHECK(timestamp == 1700000000);
  CHECK(res == HostUpdateResult::kMixed);
}

TEST_CASE("interfaces with 0, 1 and 3 addresses round-trip byte for byte, in order") {
  CHECK(Hex(EncodeWorkerAddresses(kThreeInterfaces, Key())) == Hex(kThreeInterfacesP4));
  for (const std::string& pickle : {kThreeInterfacesP4, kThreeInterfacesP3}) {
    WorkerAddresses addresses;
    std::string key, err;
    REQUIRE_MESSAGE(DecodeWorkerAddresses(pickle, &addresses, &key, &err), err);
    CHECK(addresses == kThreeInterfaces);
    CHECK(key == Key());
  }
}

TEST_CASE("an empty address dict is written as CPython does and decodes to no interfaces") {
  CHECK(Hex(EncodeWorkerAddresses({}, Key())) == Hex(kEmptyAddresses));
  WorkerAddresses addresses = kThreeInterfaces;
  std::string key, err;
  REQUIRE(DecodeWorkerAddresses(kEmptyAddresses, &addresses, &key, &err));
  CHECK(addresses.empty());
}

TEST_CASE("a 120 KB address dict matches CPython's frames, batches and out-of-frame strings") {
  // Digest of CPython 3.11.2's protocol-4 pickle of `big` (see BigAddresses).
  const WorkerAddresses big = BigAddresses();
  std::string written = EncodeWorkerAddresses(big, Key());
  CHECK(written.size() == 120614);
  CHECK(Sha256Hex(written) == "93b7f8cddcc22e9a7320dc5b2994b8af15f27046b1623c6c6c3089f896f3943f");
  WorkerAddresses decoded;
  std::string key, err;
  REQUIRE_MESSAGE(DecodeWorkerAddresses(written, &decoded, &key, &err), err);
  CHECK(decoded == big);
}

TEST_CASE("frames end where CPython's do around 64 KiB strings") {
  // ({'n' * length: addresses}, key), CPython 3.11.2, protocol 4. A 65528-byte name makes the first
  // frame exactly 65536 bytes when the list is saved, so it ends there; with 65527 it ends one
  // save() later. A 65536-byte name is written outside frames, and the 2-byte frame before it
  // (EMPTY_DICT MEMOIZE) loses its FRAME header.
  struct Case {
    size_t name_length;
    bool with_address;
    size_t size;
    const char* start;  // bytes 2..10
    const char* sha256;
  };
  const Case cases[] = {
      {65527, true, 65613, "950100010000000000",
       "f233a789c4560e1599c2de8a9fb8e879c460a266385da8635932cf55a281a908"},
      {65528, true, 65614, "950000010000000000",
       "6e8d2d087ce1e2834909e8a98eb690050b75c78bee5410eeeacc52cc34654632"},
      {65536, false, 65596, "7d9458000001006e6e",
       "3050cc33bc865901e25c1716e76013079013b2b6e664d90e41741a2eec396cf7"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name_length);
    WorkerAddresses addresses = {{std::string(c.name_length, 'n'), {}}};
    if (c.with_address) addresses[0].addresses.push_back({"10.0.0.1", 40000});
    std::string written = EncodeWorkerAddresses(addresses, Key());
    CHECK(written.size() == c.size);
    CHECK(Hex(written.substr(2, 9)) == c.start);
    CHECK(Sha256Hex(written) == c.sha256);
    WorkerAddresses decoded;
    std::string key, err;
    REQUIRE_MESSAGE(DecodeWorkerAddresses(written, &decoded, &key, &err), err);
    CHECK(decoded == addresses);
  }
}

TEST_CASE("instance state keys may come in any order") {
  // PingResponse with source_address set before service_name.
  std::string pickle = Proto4(kPingResponse);
  std::string service_key = Unhex("8c0c736572766963655f6e616d6594");
  std::string service_value = Unhex("8c1b") + "worker notification service" + Unhex("94");
  std::string source_pair =
      Unhex("8c0e") + "source_address" + Unhex("94") + Unhex("8c09") + "127.0.0.1" + Unhex("94");
  size_t at = pickle.find(service_key);
  REQUIRE(at != std::string::npos);
  pickle.replace(at, service_key.size() + service_value.size() + source_pair.size(),
                 source_pair + service_key + service_value);
  std::string service, source, err;
  REQUIRE_MESSAGE(DecodePingResponse(pickle, &service, &source, &err), err);
  CHECK(service == "worker notification service");
  CHECK(source == "127.0.0.1");
}

TEST_CASE("memo entries alias and repeated keys keep their first place, as in Python") {
  // Hand-made; pickle.loads gives ({'a': [('10.0.0.1', 80)], 'b': [('10.0.0.1', 80)]}, key): the
  // list stored by BINPUT 0 and fetched by BINGET 0 is one list, filled after both references.
  const std::string alias = Unhex(
      "80047d288c01615d71008c016268008c0831302e302e302e314b508661754320000102030405060708090a0b0c"
      "0d0e0f101112131415161718191a1b1c1d1e1f862e");
  // pickle.loads gives ({'a': [('10.0.0.1', 80)], 'b': []}, key): 'a' set twice.
  const std::string repeated = Unhex(
      "80047d288c01615d8c01625d8c01615d8c0831302e302e302e314b508661754320000102030405060708090a0b"
      "0c0d0e0f101112131415161718191a1b1c1d1e1f862e");
  WorkerAddresses addresses;
  std::string key, err;
  REQUIRE_MESSAGE(DecodeWorkerAddresses(alias, &addresses, &key, &err), err);
  CHECK(addresses == WorkerAddresses{{"a", {{"10.0.0.1", 80}}}, {"b", {{"10.0.0.1", 80}}}});
  REQUIRE_MESSAGE(DecodeWorkerAddresses(repeated, &addresses, &key, &err), err);
  CHECK(addresses == WorkerAddresses{{"a", {{"10.0.0.1", 80}}}, {"b", {}}});
}

TEST_CASE("base64 accepts exactly the canonical encoding plus one trailing newline") {
  struct Case {
    const char* text;
    bool ok;
    const char* decoded;
  };
  const Case cases[] = {
      {"", true, ""},
      {"Zg==", true, "f"},
      {"Zm8=", true, "fo"},
      {"Zm9v", true, "foo"},
      {"Zm9vYg==\n", true, "foob"},
      {"+/+/", true, "\xfb\xff\xbf"},
      {"Zm9v\n\n", false, ""},  // one newline only
      {"Zm9v\r\n", false, ""},  // no CR
      {"Zm9", false, ""},       // length
      {"Zm9v ", false, ""},     // no spaces
      {" Zm9v", false, ""},
      {"Zg=a", false, ""},  // junk after padding
      {"Z===", false, ""},
      {"====", false, ""},
      {"Zg==Zm9v", false, ""},  // padding in the middle
      {"Zh==", false, ""},      // non-zero pad bits
      {"Zm9=", false, ""},
      {"Zm-v", false, ""},  // URL-safe alphabet
      {"Zm_v", false, ""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    std::string out = "unchanged", err;
    CHECK(Base64Decode(c.text, &out, &err) == c.ok);
    CHECK(out == (c.ok ? c.decoded : "unchanged"));
    CHECK(err.empty() == c.ok);
    std::string_view canonical(c.text);
    if (canonical.ends_with('\n')) canonical.remove_suffix(1);
    if (c.ok) CHECK(Base64Encode(c.decoded) == canonical);
  }
  std::string out, err;
  CHECK_FALSE(Base64Decode(std::string_view("Zm9v\0", 5), &out, &err));
}

// ---- Rejections.

namespace {

const char kNetwork[] = "horovod.runner.common.util.network";
const char kWorker[] = "horovod.runner.elastic.worker";
const std::string kP4 = Unhex("8004");

// SHORT_BINUNICODE.
std::string U(std::string_view text) {
  return Unhex("8c") + static_cast<char>(text.size()) + std::string(text);
}

// STACK_GLOBAL module.name.
std::string G(std::string_view module, std::string_view name) {
  return U(module) + U(name) + Unhex("93");
}

// cls.__new__(cls), then BUILD with the dict of `state_items` (key/value pickles) if any.
std::string Instance(std::string_view module, std::string_view cls,
                     const std::string& state_items) {
  std::string state = state_items.empty() ? "" : Unhex("7d28") + state_items + Unhex("7562");
  return kP4 + G(module, cls) + Unhex("2981") + state + Unhex("2e");
}

std::string Hosts(const std::string& timestamp, const std::string& res) {
  return Instance(kWorker, "HostsUpdatedRequest", U("timestamp") + timestamp + U("res") + res);
}

const std::string kTimestamp = Unhex("4a00f15365");

// REDUCE(HostUpdateResult, (value,)).
std::string Flag(int value) {
  return G(kWorker, "HostUpdateResult") + Unhex("4b") + static_cast<char>(value) + Unhex("8552");
}

// (dict, key) where `dict` pickles the dict.
std::string Addresses(const std::string& dict, const std::string& key = Key()) {
  return kP4 + dict + Unhex("43") + static_cast<char>(key.size()) + key + Unhex("862e");
}

// {'eth0': [item]}.
std::string OneItem(const std::string& item) {
  return Unhex("7d") + U("eth0") + Unhex("5d") + item + Unhex("6173");
}

struct Rejection {
  const char* name;
  std::string pickle;
  Decoder decode;
  const char* error;  // a substring of the expected error
};

void CheckRejections(const std::vector<Rejection>& cases) {
  for (const Rejection& c : cases) {
    CAPTURE(c.name);
    std::string err;
    CHECK_FALSE(c.decode(c.pickle, &err));
    CHECK_MESSAGE(err.find(c.error) != std::string::npos, err);
  }
}

}  // namespace

TEST_CASE("globals outside the allow-list are refused, whatever opcode names them") {
  std::string err;
  CHECK_FALSE(AsPingRequest(kP4 + G("os", "system") + U("id") + Unhex("85522e"), &err));
  CHECK(err == "pickle byte 14: global os.system is not allowed");
  const std::string call = U("id") + Unhex("85522e");
  CheckRejections({
      {"GLOBAL os.system", Unhex("8002") + "cos\nsystem\n" + call, AsPingRequest,
       "global os.system is not allowed"},
      {"builtins.eval", kP4 + G("builtins", "eval") + call, AsPingRequest,
       "global builtins.eval is not allowed"},
      {"builtins.__import__", kP4 + G("builtins", "__import__") + call, AsPingRequest,
       "not allowed"},
      {"posix.system", kP4 + G("posix", "system") + call, AsPingRequest, "not allowed"},
      {"_operator.attrgetter", kP4 + G("_operator", "attrgetter") + call, AsPingRequest,
       "not allowed"},
      {"__builtin__.getattr (protocol-2 fix_imports spelling)",
       Unhex("8002") + "c__builtin__\ngetattr\n" + call, AsPingRequest, "not allowed"},
      {"another class of the network module", Instance(kNetwork, "Wire", ""), AsPingRequest,
       "global horovod.runner.common.util.network.Wire is not allowed"},
      {"a longer name", Instance(kNetwork, "PingRequestX", ""), AsPingRequest, "not allowed"},
      {"a dotted name", kP4 + G(kWorker, "HostUpdateResult.added") + Unhex("2e"), AsHostsUpdated,
       "not allowed"},
      {"a trailing NUL", Instance(std::string(kNetwork) + '\0', "PingRequest", ""), AsPingRequest,
       "network\\x00.PingRequest is not allowed"},
      {"GLOBAL without newline", Unhex("8002") + "cos", AsPingRequest, "GLOBAL line missing"},
      {"GLOBAL with an empty line", Unhex("8002") + "c\nsystem\n", AsPingRequest, "line empty"},
  });
}

TEST_CASE("every truncation of a valid pickle is refused") {
  for (const ValidPickle& valid : ValidPickles()) {
    CAPTURE(valid.name);
    std::string err;
    REQUIRE_MESSAGE(valid.decode(valid.bytes, &err), err);
    for (size_t length = 0; length < valid.bytes.size(); ++length) {
      CAPTURE(length);
      CHECK_FALSE(valid.decode(std::string_view(valid.bytes).substr(0, length), &err));
    }
  }
}

TEST_CASE("bytes after STOP are refused") {
  for (const ValidPickle& valid : ValidPickles()) {
    CAPTURE(valid.name);
    for (const std::string& garbage : {std::string(1, '\0'), std::string("."), Unhex("8004")}) {
      std::string err;
      CHECK_FALSE(valid.decode(valid.bytes + garbage, &err));
      CHECK(err.ends_with("bytes after STOP"));
    }
  }
}

TEST_CASE("each decoder accepts only its own message") {
  const ValidPickle messages[] = {
      {"PingRequest", kPingRequest, AsPingRequest},
      {"PingResponse", kPingResponse, AsPingResponse},
      {"AckResponse", kAckResponse, AsAckResponse},
      {"HostsUpdatedRequest", kHostsAdded, AsHostsUpdated},
      {"worker addresses", kAddressesSingle, AsAddresses},
  };
  for (const ValidPickle& message : messages) {
    for (const ValidPickle& decoder : messages) {
      CAPTURE(message.name);
      CAPTURE(decoder.name);
      std::string err;
      bool same = std::string_view(message.name) == decoder.name;
      CHECK(decoder.decode(message.bytes, &err) == same);
      if (!same) CHECK(err.find("expected") != std::string::npos);
    }
  }
  std::string err;
  CHECK_FALSE(AsPingRequest(kAckResponse, &err));
  CHECK(err == "expected a PingRequest, got AckResponse instance");
}

TEST_CASE("nesting, lengths and sizes past the limits are refused without reading them") {
  std::string marks_at_limit = kP4 + std::string(32, '(');
  std::string marks_past_limit = kP4 + std::string(33, '(');
  std::string huge(etrun::rendezvous::kMaxPickleBytes + 1, '\0');
  huge.replace(0, 3, Unhex("80044e"));
  std::string longest_str =
      Unhex("58") + std::string("\x00\x00\x01\x00", 4) + std::string(65536, 'x');
  std::string too_long_str =
      Unhex("58") + std::string("\x01\x00\x01\x00", 4) + std::string(65537, 'x');
  std::string err;
  CHECK_FALSE(AsPingRequest(marks_at_limit, &err));
  CHECK(err.ends_with("truncated: no STOP"));  // 32 levels are within the limit
  CHECK_FALSE(AsPingRequest(kP4 + longest_str + ".", &err));
  CHECK(err == "expected a PingRequest, got a str");  // a 65536-byte str is within the limit
  CheckRejections({
      {"33 nested MARKs", marks_past_limit, AsPingRequest, "MARKs nested deeper than 32"},
      {"a million MARKs", kP4 + std::string(1000000, '('), AsPingRequest, "nested deeper"},
      {"a pickle over 1 MiB", huge, AsPingRequest, "exceeds the limit of 1048576"},
      {"a 4 GiB BINUNICODE", kP4 + Unhex("58ffffffff") + "abc", AsPingRequest,
       "str of 4294967295 bytes exceeds the limit"},
      {"a 4 GiB BINBYTES", kP4 + Unhex("42ffffffff") + "abc", AsPingRequest,
       "bytes of 4294967295 bytes exceeds the limit"},
      {"a 65537-byte str", kP4 + too_long_str, AsPingRequest, "65537 bytes exceeds the limit"},
      {"a SHORT_BINUNICODE longer than the input", kP4 + Unhex("8cc8") + "abc", AsPingRequest,
       "truncated: operand needs 200 bytes, 3 left"},
      {"a FRAME longer than the input", kP4 + Unhex("95ffffffffffffffff2e"), AsPingRequest,
       "truncated: FRAME of 18446744073709551615 bytes"},
      {"a 255-byte LONG1", Hosts(Unhex("8aff") + std::string(255, '\x01'), Flag(2)), AsHostsUpdated,
       "LONG1 of 255 bytes exceeds int64"},
      {"a LONG_BINGET of an unset entry", kP4 + Unhex("6affffffff2e"), AsPingRequest,
       "memo entry 4294967295 is not set"},
      {"a deep stack", kP4 + std::string(70000, 'N'), AsPingRequest, "stack deeper than 65536"},
      {"65537 memo entries", kP4 + Unhex("4e") + std::string(65537, '\x94'), AsPingRequest,
       "more than 65536 memo entries"},
      {"262145 values",
       kP4 + Unhex("5d") +
           [] {
             std::string appends;
             for (int i = 0; i < 262144; ++i) appends += Unhex("4e61");
             return appends;
           }(),
       AsPingRequest, "more than 262144 values"},
  });
}

TEST_CASE("malformed structure is refused") {
  const std::string list = Unhex("5d");
  CheckRejections({
      {"no PROTO", Unhex("2e"), AsPingRequest, "not a pickle of protocol 2-5"},
      {"PROTO 1", Unhex("80014e2e"), AsPingRequest, "protocol 2-5"},
      {"PROTO 6", Unhex("80064e2e"), AsPingRequest, "protocol 2-5"},
      {"PROTO twice", kP4 + Unhex("80044e2e"), AsPingRequest, "PROTO after the start"},
      {"empty input", "", AsPingRequest, "protocol 2-5"},
      {"no STOP", kP4 + Unhex("4e"), AsPingRequest, "truncated: no STOP"},
      {"STOP on an empty stack", kP4 + Unhex("2e"), AsPingRequest, "STOP with 0 values"},
      {"STOP with two values", kP4 + Unhex("4e4e2e"), AsPingRequest, "STOP with 2 values"},
      {"STOP with an open MARK", kP4 + Unhex("4e282e"), AsPingRequest, "1 open MARKs"},
      {"SETITEM on an empty stack", kP4 + Unhex("732e"), AsPingRequest, "stack underflow"},
      {"TUPLE2 of one value", kP4 + Unhex("4e862e"), AsPingRequest, "stack underflow"},
      {"popping below a MARK", kP4 + Unhex("4e28852e"), AsPingRequest, "stack underflow"},
      {"STACK_GLOBAL across a MARK", kP4 + U(kNetwork) + U("PingRequest") + Unhex("28932e"),
       AsPingRequest, "stack underflow"},
      {"REDUCE across a MARK", kP4 + G(kWorker, "HostUpdateResult") + Unhex("4b018528522e"),
       AsPingRequest, "stack underflow"},
      {"APPENDS without MARK", kP4 + Unhex("5d652e"), AsPingRequest, "no MARK to pop to"},
      {"SETITEMS with no dict below the MARK", kP4 + Unhex("28") + U("k") + Unhex("4e752e"),
       AsPingRequest, "stack underflow"},
      {"SETITEM on a list", kP4 + list + U("k") + Unhex("4e732e"), AsPingRequest,
       "expected dict, got list"},
      {"APPEND to a dict", kP4 + Unhex("7d4e612e"), AsPingRequest, "expected list, got dict"},
      {"a non-str dict key", kP4 + Unhex("7d4b014b02732e"), AsPingRequest, "expected str, got int"},
      {"a non-str key in SETITEMS", kP4 + Unhex("7d284b014b02752e"), AsPingRequest,
       "dict key is not a str"},
      {"odd SETITEMS", kP4 + Unhex("7d28") + U("k") + Unhex("752e"), AsPingRequest,
       "odd number of items"},
      {"STACK_GLOBAL of bytes", kP4 + Unhex("430161430162932e"), AsPingRequest,
       "expected str, got bytes"},
      {"invalid UTF-8", kP4 + Unhex("8c02c3282e"), AsPingRequest, "not valid UTF-8"},
      {"a UTF-8 surrogate", kP4 + Unhex("8c03eda0802e"), AsPingRequest, "not valid UTF-8"},
      {"an overlong UTF-8 NUL", kP4 + Unhex("8c02c0802e"), AsPingRequest, "not valid UTF-8"},
      {"a truncated UTF-8 sequence", kP4 + Unhex("8c01e22e"), AsPingRequest, "not valid UTF-8"},
      {"a BINGET of nothing", kP4 + Unhex("68002e"), AsPingRequest, "memo entry 0 is not set"},
      {"MEMOIZE on an empty stack", kP4 + Unhex("942e"), AsPingRequest, "stack underflow"},
      {"text INT", kP4 + Unhex("49310a2e"), AsPingRequest, "unsupported opcode 0x49"},
      {"POP", kP4 + Unhex("4e302e"), AsPingRequest, "unsupported opcode 0x30"},
      {"NEWOBJ_EX", kP4 + Unhex("922e"), AsPingRequest, "unsupported opcode 0x92"},
      {"BINFLOAT", kP4 + Unhex("47") + std::string(8, '\0') + ".", AsPingRequest,
       "unsupported opcode 0x47"},
      {"BINUNICODE8", kP4 + Unhex("8d0100000000000000612e"), AsPingRequest,
       "unsupported opcode 0x8d"},
      {"BINPERSID", kP4 + Unhex("4e512e"), AsPingRequest, "unsupported opcode 0x51"},
      {"INST", kP4 + "ios\nsystem\n.", AsPingRequest, "unsupported opcode 0x69"},
      {"EXT1", kP4 + Unhex("82012e"), AsPingRequest, "unsupported opcode 0x82"},
  });
}

TEST_CASE("only the REDUCE, NEWOBJ and BUILD shapes of Horovod's messages are run") {
  const std::string result_class = G(kWorker, "HostUpdateResult");
  const std::string getattr = G("builtins", "getattr");
  const std::string or_ = G("_operator", "or_");
  auto name_form = [&](std::string_view name) {
    return getattr + result_class + U(name) + Unhex("8652");
  };
  CheckRejections({
      {"HostUpdateResult(4)", Hosts(kTimestamp, Flag(4)), AsHostsUpdated,
       "unsupported REDUCE of horovod.runner.elastic.worker.HostUpdateResult"},
      {"HostUpdateResult('added')", Hosts(kTimestamp, result_class + U("added") + Unhex("8552")),
       AsHostsUpdated, "unsupported REDUCE"},
      {"HostUpdateResult(True)", Hosts(kTimestamp, result_class + Unhex("888552")), AsHostsUpdated,
       "unsupported REDUCE"},
      {"getattr(HostUpdateResult, '__class__')", Hosts(kTimestamp, name_form("__class__")),
       AsHostsUpdated, "HostUpdateResult has no member __class__"},
      {"getattr(PingRequest, 'added')",
       Hosts(kTimestamp, getattr + G(kNetwork, "PingRequest") + U("added") + Unhex("8652")),
       AsHostsUpdated, "unsupported REDUCE of builtins.getattr"},
      {"or_(added, 'x')", Hosts(kTimestamp, or_ + name_form("added") + U("x") + Unhex("8652")),
       AsHostsUpdated, "unsupported REDUCE of _operator.or_"},
      {"or_ of three", Hosts(kTimestamp, or_ + Unhex("4b014b024b038752")), AsHostsUpdated,
       "REDUCE with more than 2 arguments"},
      {"PingRequest() by REDUCE", kP4 + G(kNetwork, "PingRequest") + Unhex("29522e"), AsPingRequest,
       "unsupported REDUCE of horovod.runner.common.util.network.PingRequest"},
      {"REDUCE of a str", kP4 + U("x") + Unhex("29522e"), AsPingRequest,
       "expected global, got str"},
      {"REDUCE with a list of args", kP4 + result_class + Unhex("5d522e"), AsPingRequest,
       "expected tuple, got list"},
      {"NEWOBJ with arguments", kP4 + G(kNetwork, "PingRequest") + Unhex("4e85812e"), AsPingRequest,
       "NEWOBJ with arguments"},
      {"NEWOBJ of HostUpdateResult", kP4 + result_class + Unhex("29812e"), AsHostsUpdated,
       "NEWOBJ of a non-message global"},
      {"NEWOBJ of getattr", kP4 + getattr + Unhex("29812e"), AsPingRequest,
       "NEWOBJ of a non-message global"},
      {"BUILD with a tuple state", kP4 + G(kNetwork, "PingRequest") + Unhex("29814e4e86622e"),
       AsPingRequest, "expected dict, got tuple"},
      {"BUILD on a dict", kP4 + Unhex("7d7d622e"), AsPingRequest, "expected object, got dict"},
  });
  // The same 3-attribute state BUILt six times passes 16 attributes.
  std::string state = Unhex("7d7100") + Unhex("28") + U("a") + Unhex("4e") + U("b") + Unhex("4e") +
                      U("c") + Unhex("4e75");
  std::string pickle = kP4 + G(kNetwork, "PingRequest") + Unhex("2981") + state + Unhex("62");
  for (int i = 0; i < 5; ++i) pickle += Unhex("680062");
  std::string err;
  CHECK_FALSE(AsPingRequest(pickle + ".", &err));
  CHECK(err.ends_with("more than 16 attributes"));
}

TEST_CASE("instances with missing, extra or mistyped attributes are refused") {
  const std::string service = U("service_name") + U("worker notification service");
  const std::string source = U("source_address") + U("127.0.0.1");
  CheckRejections({
      {"no res", Instance(kWorker, "HostsUpdatedRequest", U("timestamp") + kTimestamp),
       AsHostsUpdated, "HostsUpdatedRequest lacks the attribute res"},
      {"no state at all", Instance(kWorker, "HostsUpdatedRequest", ""), AsHostsUpdated,
       "lacks the attribute timestamp"},
      {"an extra attribute", Hosts(kTimestamp, Flag(2) + U("extra") + Unhex("4e")), AsHostsUpdated,
       "HostsUpdatedRequest has an unexpected attribute extra"},
      {"res = 4", Hosts(kTimestamp, Unhex("4b04")), AsHostsUpdated,
       "HostsUpdatedRequest.res is not a HostUpdateResult in 0..3"},
      {"res = -1", Hosts(kTimestamp, Unhex("4affffffff")), AsHostsUpdated, "in 0..3"},
      {"res = or_(2, 4)", Hosts(kTimestamp, G("_operator", "or_") + Unhex("4b024b048652")),
       AsHostsUpdated, "in 0..3"},
      {"res = None", Hosts(kTimestamp, Unhex("4e")), AsHostsUpdated, "in 0..3"},
      {"timestamp = True", Hosts(Unhex("88"), Flag(2)), AsHostsUpdated,
       "HostsUpdatedRequest.timestamp is a bool, not an int"},
      {"timestamp = '1700000000'", Hosts(U("1700000000"), Flag(2)), AsHostsUpdated,
       "timestamp is a str"},
      {"service_name as bytes",
       Instance(kNetwork, "PingResponse", U("service_name") + Unhex("430178") + source),
       AsPingResponse, "PingResponse field is a bytes, not a str"},
      {"no source_address", Instance(kNetwork, "PingResponse", service), AsPingResponse,
       "lacks the attribute source_address"},
      {"a PingRequest with an attribute", Instance(kNetwork, "PingRequest", U("x") + Unhex("4e")),
       AsPingRequest, "PingRequest has an unexpected attribute x"},
      {"a bare class", kP4 + G(kNetwork, "PingRequest") + Unhex("2e"), AsPingRequest,
       "expected a PingRequest, got a global"},
  });
  // A repeated attribute: the last value wins, as with dict.update.
  std::string service_out, source_out, err;
  REQUIRE(DecodePingResponse(
      Instance(kNetwork, "PingResponse", U("service_name") + U("old") + service + source),
      &service_out, &source_out, &err));
  CHECK(service_out == "worker notification service");
}

TEST_CASE("worker address values of the wrong shape are refused") {
  const std::string address = U("10.0.0.1") + Unhex("4d409c86");
  std::string err;
  REQUIRE_MESSAGE(AsAddresses(Addresses(OneItem(address)), &err), err);  // the shape that passes
  CheckRejections({
      {"a 31-byte key", Addresses(OneItem(address), Key().substr(1)), AsAddresses,
       "worker addresses: the key has 31 bytes, not 32"},
      {"a str key", kP4 + Unhex("7d") + U(Key()) + Unhex("862e"), AsAddresses,
       "expected a (dict, bytes) tuple, got a tuple"},
      {"a list instead of a tuple", kP4 + Unhex("5d2e"), AsAddresses,
       "expected a (dict, bytes) tuple, got a list"},
      {"a 3-tuple", kP4 + Unhex("7d") + Unhex("4320") + Key() + Unhex("4e872e"), AsAddresses,
       "(dict, bytes) tuple"},
      {"port 0", Addresses(OneItem(U("10.0.0.1") + Unhex("4b0086"))), AsAddresses,
       "interface eth0 has an entry that is not an (ip str, port 1..65535) tuple"},
      {"port 65536", Addresses(OneItem(U("10.0.0.1") + Unhex("4a0000010086"))), AsAddresses,
       "port 1..65535"},
      {"port -1", Addresses(OneItem(U("10.0.0.1") + Unhex("4affffffff86"))), AsAddresses,
       "port 1..65535"},
      {"port as a str", Addresses(OneItem(U("10.0.0.1") + U("40000") + Unhex("86"))), AsAddresses,
       "port 1..65535"},
      {"port as a bool", Addresses(OneItem(U("10.0.0.1") + Unhex("8886"))), AsAddresses,
       "port 1..65535"},
      {"ip as bytes", Addresses(OneItem(Unhex("43020a01") + Unhex("4d409c86"))), AsAddresses,
       "port 1..65535"},
      {"a 65-byte ip", Addresses(OneItem(U(std::string(65, '1')) + Unhex("4d409c86"))), AsAddresses,
       "port 1..65535"},
      {"an (ip, port) list", Addresses(OneItem(Unhex("5d") + U("10.0.0.1") + Unhex("614d409c61"))),
       AsAddresses, "port 1..65535"},
      {"a 3-tuple address",
       Addresses(OneItem(address.substr(0, address.size() - 1) + Unhex("4e87"))), AsAddresses,
       "port 1..65535"},
      {"a tuple of addresses", Addresses(Unhex("7d") + U("eth0") + address + Unhex("8573")),
       AsAddresses, "interface eth0 maps to a tuple, not a list"},
      {"a list that contains itself",
       Addresses(Unhex("7d") + U("eth0") + Unhex("5d7100680061") + Unhex("73")), AsAddresses,
       "not an (ip str, port 1..65535) tuple"},
  });
}

TEST_CASE("a shared list cannot blow the decoded addresses up") {
  // One list of 300 addresses shared by 300 interfaces (BINGET) would decode to 90000 > 65536.
  std::string pickle = kP4 + Unhex("7d28") + U("if0") + Unhex("5d710028");
  for (int i = 0; i < 300; ++i) pickle += U("10.0.0.1") + Unhex("4d409c86");
  pickle += Unhex("65");
  for (int i = 1; i < 300; ++i) pickle += U("if" + std::to_string(i)) + Unhex("6800");
  pickle += Unhex("75") + Unhex("4320") + Key() + Unhex("862e");
  std::string err;
  CHECK_FALSE(AsAddresses(pickle, &err));
  CHECK(err == "worker addresses: more than 65536 addresses");
  // With 200 interfaces sharing it (60000 addresses) it decodes.
  std::string fewer = pickle;
  size_t cut = fewer.find(U("if200"));
  REQUIRE(cut != std::string::npos);
  fewer = fewer.substr(0, cut) + Unhex("75") + Unhex("4320") + Key() + Unhex("862e");
  WorkerAddresses addresses;
  std::string key;
  REQUIRE_MESSAGE(DecodeWorkerAddresses(fewer, &addresses, &key, &err), err);
  CHECK(addresses.size() == 200);
  CHECK(addresses[199].addresses.size() == 300);
}
