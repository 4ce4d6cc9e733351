// See pickle_machine.h.
#include "rendezvous/pickle_machine.h"

#include <array>

#include "rendezvous/pickle.h"
#include "rendezvous/pickle_opcodes.h"

namespace etrun::rendezvous::pickle_vm {
namespace {

namespace op = pickle_op;

constexpr size_t kMaxGlobalLine = 256;
constexpr size_t kMaxObjectAttributes = 16;  // over all BUILDs of one instance

constexpr std::array<const char*, 11> kKindNames = {
    "None", "bool", "int",    "str",    "bytes",           "tuple",
    "list", "dict", "global", "object", "HostUpdateResult"};

struct AllowedGlobal {
  std::string_view module, name;
};

// In the order of enum Global.
constexpr std::array<AllowedGlobal, 7> kAllowedGlobals = {{
    {op::kPingModule, "PingRequest"},
    {op::kPingModule, "PingResponse"},
    {op::kPingModule, "AckResponse"},
    {op::kWorkerModule, "HostsUpdatedRequest"},
    {op::kWorkerModule, "HostUpdateResult"},
    {"builtins", "getattr"},
    {"_operator", "or_"},
}};

constexpr std::array<std::string_view, 4> kFlagNames = {"no_update", "removed", "added", "mixed"};

// RFC 3629 UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool IsUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = c >= 0xc2 && c <= 0xdf   ? 1
               : c >= 0xe0 && c <= 0xef ? 2
               : c >= 0xf0 && c <= 0xf4 ? 3
                                        : 0;
    if (n == 0 || text.size() - i <= n) return false;
    unsigned low = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned high = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    auto second = static_cast<unsigned char>(text[i + 1]);
    if (second < low || second > high) return false;
    for (size_t k = 2; k <= n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return false;
    }
    i += n + 1;
  }
  return true;
}

}  // namespace

const char* KindName(Kind kind) { return kKindNames[static_cast<size_t>(kind)]; }

std::string_view GlobalName(Global global) {
  return kAllowedGlobals[static_cast<size_t>(global)].name;
}

std::string Printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size() && i < 64; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  if (text.size() > 64) out += "...";
  return out;
}

bool Machine::Fail(const std::string& what) {
  error_ = "pickle byte " + std::to_string(op_pos_) + ": " + what;
  return false;
}

bool Machine::Run(std::string_view data, uint32_t* root, std::string* err) {
  data_ = data;
  bool ok = Execute(root);
  if (!ok) *err = error_;
  return ok;
}

bool Machine::Execute(uint32_t* root) {
  if (data_.size() > kMaxPickleBytes) {
    return Fail("pickle of " + std::to_string(data_.size()) + " bytes exceeds the limit of " +
                std::to_string(kMaxPickleBytes));
  }
  if (data_.size() < 2 || static_cast<uint8_t>(data_[0]) != op::kProto || data_[1] < 2 ||
      data_[1] > 5) {
    return Fail("not a pickle of protocol 2-5 (expected 80 02..80 05)");
  }
  for (pos_ = 2;;) {
    op_pos_ = pos_;
    if (pos_ >= data_.size()) return Fail("truncated: no STOP");
    auto opcode = static_cast<uint8_t>(data_[pos_++]);
    if (opcode != op::kStop) {
      if (!Step(opcode)) return false;
      continue;
    }
    if (!marks_.empty() || stack_.size() != 1) {
      return Fail("STOP with " + std::to_string(stack_.size()) + " values and " +
                  std::to_string(marks_.size()) + " open MARKs on the stack");
    }
    if (pos_ != data_.size()) {
      return Fail(std::to_string(data_.size() - pos_) + " bytes after STOP");
    }
    *root = stack_[0];
    return true;
  }
}

bool Machine::Read(size_t n, std::string_view* out) {
  if (data_.size() - pos_ < n) {
    return Fail("truncated: operand needs " + std::to_string(n) + " bytes, " +
                std::to_string(data_.size() - pos_) + " left");
  }
  *out = data_.substr(pos_, n);
  pos_ += n;
  return true;
}

bool Machine::ReadUint(size_t n, uint64_t* out) {
  std::string_view bytes;
  if (!Read(n, &bytes)) return false;
  *out = 0;
  for (size_t i = 0; i < n; ++i) *out |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  return true;
}

bool Machine::ReadText(size_t length_bytes, Kind kind) {
  uint64_t length = 0;
  std::string_view text;
  if (!ReadUint(length_bytes, &length)) return false;
  if (length > kMaxPickleStringBytes) {
    return Fail(std::string(KindName(kind)) + " of " + std::to_string(length) +
                " bytes exceeds the limit of " + std::to_string(kMaxPickleStringBytes));
  }
  if (!Read(length, &text)) return false;
  if (kind == Kind::kStr && !IsUtf8(text)) return Fail("str is not valid UTF-8");
  return PushNew(Value{kind, 0, std::string(text), {}});
}

bool Machine::ReadLine(std::string_view* out) {
  std::string_view rest = data_.substr(pos_, kMaxGlobalLine + 1);
  size_t end = rest.find('\n');
  if (end == std::string_view::npos) return Fail("GLOBAL line missing or too long");
  if (end == 0) return Fail("GLOBAL line empty");
  *out = rest.substr(0, end);
  pos_ += end + 1;
  return true;
}

bool Machine::Push(uint32_t index) {
  if (stack_.size() >= kMaxPickleStackDepth) {
    return Fail("stack deeper than " + std::to_string(kMaxPickleStackDepth));
  }
  stack_.push_back(index);
  return true;
}

bool Machine::PushNew(Value value) {
  if (values_.size() >= kMaxPickleValues) {
    return Fail("more than " + std::to_string(kMaxPickleValues) + " values");
  }
  values_.push_back(std::move(value));
  return Push(static_cast<uint32_t>(values_.size() - 1));
}

bool Machine::Pop(uint32_t* index) {
  if (stack_.size() <= Fence()) return Fail("stack underflow");
  *index = stack_.back();
  stack_.pop_back();
  return true;
}

bool Machine::Pop(Kind kind, uint32_t* index) {
  if (!Pop(index)) return false;
  if (at(*index).kind != kind) {
    return Fail(std::string("expected ") + KindName(kind) + ", got " + KindName(at(*index).kind));
  }
  return true;
}

// Closes the innermost MARK; the items pushed since are stack_[*start..].
bool Machine::PopMark(size_t* start) {
  if (marks_.empty()) return Fail("no MARK to pop to");
  *start = marks_.back();
  marks_.pop_back();
  return true;
}

// The value `depth` below the top (0 = top), which must sit above the fence and be a `kind`.
bool Machine::Top(Kind kind, size_t depth, uint32_t* index) {
  if (stack_.size() - Fence() <= depth) return Fail("stack underflow");
  *index = stack_[stack_.size() - 1 - depth];
  if (at(*index).kind != kind) {
    return Fail(std::string("expected ") + KindName(kind) + ", got " + KindName(at(*index).kind));
  }
  return true;
}

bool Machine::Memo(uint64_t index, uint32_t value) {
  if (!memo_.contains(index) && memo_.size() >= kMaxPickleMemoEntries) {
    return Fail("more than " + std::to_string(kMaxPickleMemoEntries) + " memo entries");
  }
  memo_[index] = value;
  return true;
}

bool Machine::Get(uint64_t index) {
  auto it = memo_.find(index);
  if (it == memo_.end()) return Fail("memo entry " + std::to_string(index) + " is not set");
  return Push(it->second);
}

bool Machine::Resolve(std::string_view module, std::string_view name) {
  for (size_t i = 0; i < kAllowedGlobals.size(); ++i) {
    if (kAllowedGlobals[i].module == module && kAllowedGlobals[i].name == name) {
      return PushNew(Value{Kind::kGlobal, static_cast<int64_t>(i), {}, {}});
    }
  }
  return Fail("global " + Printable(module) + "." + Printable(name) + " is not allowed");
}

// The REDUCE shapes of §5.6; anything else is refused, nothing is ever called.
bool Machine::Reduce(Global callable, const std::vector<uint32_t>& args) {
  if (callable == Global::kHostUpdateResult && args.size() == 1 && IntLike(args[0]) &&
      at(args[0]).number >= 0 && at(args[0]).number <= 3) {
    return PushNew(Value{Kind::kFlag, at(args[0]).number, {}, {}});
  }
  if (callable == Global::kGetattr && args.size() == 2 && at(args[0]).kind == Kind::kGlobal &&
      at(args[0]).number == static_cast<int64_t>(Global::kHostUpdateResult) &&
      at(args[1]).kind == Kind::kStr) {
    for (size_t i = 0; i < kFlagNames.size(); ++i) {
      if (at(args[1]).text == kFlagNames[i]) {
        return PushNew(Value{Kind::kFlag, static_cast<int64_t>(i), {}, {}});
      }
    }
    return Fail("HostUpdateResult has no member " + Printable(at(args[1]).text));
  }
  if (callable == Global::kOr && args.size() == 2 && IntLike(args[0]) && IntLike(args[1])) {
    bool flag = at(args[0]).kind == Kind::kFlag || at(args[1]).kind == Kind::kFlag;
    return PushNew(
        Value{flag ? Kind::kFlag : Kind::kInt, at(args[0]).number | at(args[1]).number, {}, {}});
  }
  const AllowedGlobal& global = kAllowedGlobals[static_cast<size_t>(callable)];
  return Fail("unsupported REDUCE of " + std::string(global.module) + "." +
              std::string(global.name) + " with " + std::to_string(args.size()) + " arguments");
}

bool Machine::Step(uint8_t opcode) {
  uint64_t n = 0;
  uint32_t a = 0, b = 0, c = 0;
  size_t start = 0;
  std::string_view module, name;
  switch (opcode) {
    case op::kFrame:
      if (!ReadUint(8, &n)) return false;
      if (n > data_.size() - pos_) {
        return Fail("truncated: FRAME of " + std::to_string(n) + " bytes");
      }
      return true;
    case op::kMemoize:
      if (stack_.size() <= Fence()) return Fail("stack underflow");
      return Memo(memo_.size(), stack_.back());
    case op::kBinPut:
    case op::kLongBinPut:
      if (!ReadUint(opcode == op::kBinPut ? 1 : 4, &n)) return false;
      if (stack_.size() <= Fence()) return Fail("stack underflow");
      return Memo(n, stack_.back());
    case op::kBinGet:
    case op::kLongBinGet:
      return ReadUint(opcode == op::kBinGet ? 1 : 4, &n) && Get(n);
    case op::kShortBinUnicode:
      return ReadText(1, Kind::kStr);
    case op::kBinUnicode:
      return ReadText(4, Kind::kStr);
    case op::kShortBinBytes:
      return ReadText(1, Kind::kBytes);
    case op::kBinBytes:
      return ReadText(4, Kind::kBytes);
    case op::kBinInt1:
    case op::kBinInt2:
      if (!ReadUint(opcode == op::kBinInt1 ? 1 : 2, &n)) return false;
      return PushNew(Value{Kind::kInt, static_cast<int64_t>(n), {}, {}});
    case op::kBinInt:
      if (!ReadUint(4, &n)) return false;
      return PushNew(Value{Kind::kInt, static_cast<int32_t>(static_cast<uint32_t>(n)), {}, {}});
    case op::kLong1: {
      uint64_t size = 0;
      if (!ReadUint(1, &size)) return false;
      if (size > 8) return Fail("LONG1 of " + std::to_string(size) + " bytes exceeds int64");
      if (!ReadUint(size, &n)) return false;
      if (size > 0 && size < 8 && (n >> (8 * size - 1)) != 0) n |= ~uint64_t{0} << (8 * size);
      return PushNew(Value{Kind::kInt, static_cast<int64_t>(n), {}, {}});
    }
    case op::kNone:
      return PushNew(Value{});
    case op::kNewTrue:
    case op::kNewFalse:
      return PushNew(Value{Kind::kBool, opcode == op::kNewTrue, {}, {}});
    case op::kEmptyTuple:
      return PushNew(Value{Kind::kTuple, 0, {}, {}});
    case op::kTuple1:
    case op::kTuple2:
    case op::kTuple3:
      n = opcode - op::kTuple1 + 1;
      if (stack_.size() - Fence() < n) return Fail("stack underflow");
      start = stack_.size() - n;
      [[fallthrough]];
    case op::kTuple: {
      if (opcode == op::kTuple && !PopMark(&start)) return false;
      Value tuple{Kind::kTuple, 0, {}, {stack_.begin() + start, stack_.end()}};
      stack_.resize(start);
      return PushNew(std::move(tuple));
    }
    case op::kMark:
      if (marks_.size() >= kMaxPickleMarkDepth) {
        return Fail("MARKs nested deeper than " + std::to_string(kMaxPickleMarkDepth));
      }
      marks_.push_back(stack_.size());
      return true;
    case op::kEmptyDict:
      return PushNew(Value{Kind::kDict, 0, {}, {}});
    case op::kEmptyList:
      return PushNew(Value{Kind::kList, 0, {}, {}});
    case op::kSetItem:
      if (!Top(Kind::kStr, 1, &a) || !Top(Kind::kDict, 2, &c)) return false;
      b = stack_.back();
      values_[c].items.insert(values_[c].items.end(), {a, b});
      stack_.resize(stack_.size() - 2);
      return true;
    case op::kAppend:
      if (!Top(Kind::kList, 1, &c)) return false;
      values_[c].items.push_back(stack_.back());
      stack_.pop_back();
      return true;
    case op::kSetItems:
    case op::kAppends: {
      bool dict = opcode == op::kSetItems;
      if (!PopMark(&start) || !Top(dict ? Kind::kDict : Kind::kList, stack_.size() - start, &c)) {
        return false;
      }
      if (dict && (stack_.size() - start) % 2 != 0) return Fail("odd number of items for SETITEMS");
      for (size_t i = start; dict && i < stack_.size(); i += 2) {
        if (at(stack_[i]).kind != Kind::kStr) return Fail("dict key is not a str");
      }
      values_[c].items.insert(values_[c].items.end(), stack_.begin() + start, stack_.end());
      stack_.resize(start);
      return true;
    }
    case op::kStackGlobal:
      if (!Pop(Kind::kStr, &b) || !Pop(Kind::kStr, &a)) return false;
      return Resolve(at(a).text, at(b).text);
    case op::kGlobal:
      return ReadLine(&module) && ReadLine(&name) && Resolve(module, name);
    case op::kNewObj:
      if (!Pop(Kind::kTuple, &b) || !Pop(Kind::kGlobal, &a)) return false;
      if (at(a).number > static_cast<int64_t>(Global::kHostsUpdatedRequest)) {
        return Fail("NEWOBJ of a non-message global");
      }
      if (!at(b).items.empty()) return Fail("NEWOBJ with arguments");
      return PushNew(Value{Kind::kObject, at(a).number, {}, {}});
    case op::kReduce: {
      if (!Pop(Kind::kTuple, &b) || !Pop(Kind::kGlobal, &a)) return false;
      if (at(b).items.size() > 2) return Fail("REDUCE with more than 2 arguments");
      std::vector<uint32_t> args = at(b).items;  // copied: PushNew may move values_
      return Reduce(static_cast<Global>(at(a).number), args);
    }
    case op::kBuild: {
      if (!Pop(Kind::kDict, &b) || !Top(Kind::kObject, 0, &a)) return false;
      if (at(a).items.size() + at(b).items.size() > 2 * kMaxObjectAttributes) {
        return Fail("more than " + std::to_string(kMaxObjectAttributes) + " attributes");
      }
      const std::vector<uint32_t>& state = values_[b].items;  // b != a: a dict is no object
      values_[a].items.insert(values_[a].items.end(), state.begin(), state.end());
      return true;
    }
    case op::kProto:
      return Fail("PROTO after the start");
    default:
      break;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  return Fail(std::string("unsupported opcode 0x") + kHex[opcode >> 4] + kHex[opcode & 15]);
}

}  // namespace etrun::rendezvous::pickle_vm
