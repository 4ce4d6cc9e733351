// The unpickler behind rendezvous/pickle.h's decoders: a stack machine over the opcode subset of
// spec §5.6 with the semantics of CPython's C unpickler (Modules/_pickle.c) where they matter: a
// MARK fences the stack (no opcode pops below it), MEMOIZE stores at index len(memo), memo entries
// alias (a list stored in the memo and appended to later is seen filled by a later BINGET). Globals
// resolve only against a fixed allow-list and REDUCE/NEWOBJ/BUILD only in the shapes Horovod's
// messages use; nothing is imported or called. Values live in one arena and refer to each other
// by index, so aliasing and even cycles are harmless; callers walk the result along a fixed shape.
// Every length, count and depth is bounded (pickle.h's kMaxPickle* constants). Internal to
// pickle_machine.cc and pickle_reader.cc. A Machine is single-use and not thread-safe.
#ifndef ETRUN_RENDEZVOUS_PICKLE_MACHINE_H_
#define ETRUN_RENDEZVOUS_PICKLE_MACHINE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace etrun::rendezvous::pickle_vm {

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kStr,
  kBytes,
  kTuple,
  kList,
  kDict,
  kGlobal,
  kObject,
  kFlag
};

// The allow-list. Objects are instances of the first four.
enum class Global : uint8_t {
  kPingRequest,
  kPingResponse,
  kAckResponse,
  kHostsUpdatedRequest,
  kHostUpdateResult,
  kGetattr,
  kOr
};

struct Value {
  Kind kind = Kind::kNone;
  int64_t number = 0;           // kBool, kInt, kFlag (a HostUpdateResult); the Global of kGlobal
                                // and kObject
  std::string text;             // kStr (valid UTF-8), kBytes
  std::vector<uint32_t> items;  // kTuple, kList; kDict and kObject: key, value, key, value, ...
                                // (keys are kStr; a key may repeat, the last value wins)
};

// "None", "int", ..., "HostUpdateResult" for kFlag.
const char* KindName(Kind kind);

// The class or function name of an allowed global, e.g. "PingResponse".
std::string_view GlobalName(Global global);

// For error messages: at most 64 bytes, non-printable bytes and '\\' as \xNN.
std::string Printable(std::string_view text);

class Machine {
 public:
  // Runs `data`, which must be one whole pickle (PROTO 2-5 ... STOP and nothing after). Returns
  // true with *root indexing the result, or false with *err saying what and at which byte.
  bool Run(std::string_view data, uint32_t* root, std::string* err);

  // REQUIRES: index came from Run or from a Value this machine returned.
  const Value& at(uint32_t index) const { return values_[index]; }

 private:
  bool Execute(uint32_t* root);
  bool Step(uint8_t opcode);
  bool Fail(const std::string& what);
  bool Read(size_t n, std::string_view* out);
  bool ReadUint(size_t n, uint64_t* out);
  bool ReadText(size_t length_bytes, Kind kind);
  bool ReadLine(std::string_view* out);
  size_t Fence() const { return marks_.empty() ? 0 : marks_.back(); }
  bool Push(uint32_t index);
  bool PushNew(Value value);
  bool Pop(uint32_t* index);
  bool Pop(Kind kind, uint32_t* index);
  bool PopMark(size_t* start);
  bool Top(Kind kind, size_t depth, uint32_t* index);
  bool Memo(uint64_t index, uint32_t value);
  bool Get(uint64_t index);
  bool Resolve(std::string_view module, std::string_view name);
  bool Reduce(Global callable, const std::vector<uint32_t>& args);
  bool IntLike(uint32_t index) const {
    return at(index).kind == Kind::kInt || at(index).kind == Kind::kFlag;
  }

  std::string_view data_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;  // offset of the opcode being run, for errors
  std::vector<Value> values_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;  // stack_ sizes at each open MARK
  std::unordered_map<uint64_t, uint32_t> memo_;
  std::string error_;
};

}  // namespace etrun::rendezvous::pickle_vm

#endif  // ETRUN_RENDEZVOUS_PICKLE_MACHINE_H_
