// Protocol-4 writer for the messages of rendezvous/pickle.h. It replays what CPython's C pickler
// (Modules/_pickle.c) does for these objects, so the bytes match `pickle.dumps(obj, protocol=4)`:
// framing (a frame opens at the first write after PROTO, is committed when it has grown to 64 KiB
// at the start of a save(), loses its header when under 4 bytes, and payloads of 64 KiB or more are
// written outside frames), memo numbering, batches of 1000 for APPENDS/SETITEMS (including the
// empty trailing SETITEMS batch CPython writes after a dict of exactly 1000*k entries).
#include <bit>
#include <functional>
#include <map>

#include "rendezvous/pickle.h"
#include "rendezvous/pickle_opcodes.h"

namespace etrun::rendezvous {
namespace {

namespace op = pickle_op;

constexpr size_t kFrameHeaderBytes = 9;
constexpr size_t kFrameSizeMin = 4;
constexpr size_t kFrameSizeTarget = 64 * 1024;
constexpr size_t kBatchSize = 1000;

void AppendLittleEndian(std::string* out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// Each public method is one CPython save() call of the named kind.
class Writer {
 public:
  Writer() {
    out_.push_back(static_cast<char>(op::kProto));
    out_.push_back(4);
  }

  std::string Finish() {
    Op(op::kStop);
    CommitFrame();
    return std::move(out_);
  }

  void Int(int64_t value) {  // save_long
    Boundary();
    std::string arg;
    if (value >= 0 && value <= 0xff) {
      Op(op::kBinInt1);
      AppendLittleEndian(&arg, static_cast<uint64_t>(value), 1);
    } else if (value >= 0 && value <= 0xffff) {
      Op(op::kBinInt2);
      AppendLittleEndian(&arg, static_cast<uint64_t>(value), 2);
    } else if (value >= INT32_MIN && value <= INT32_MAX) {
      Op(op::kBinInt);
      AppendLittleEndian(&arg, static_cast<uint64_t>(value), 4);
    } else {  // encode_long: minimal two's complement, little-endian
      uint64_t magnitude = value < 0 ? 0 - static_cast<uint64_t>(value) : value;
      size_t n = (64 - std::countl_zero(magnitude)) / 8 + 1;
      for (size_t i = 0; i < n; ++i) {
        arg.push_back(static_cast<char>(i < 8 ? (static_cast<uint64_t>(value) >> (8 * i)) & 0xff
                                              : (value < 0 ? 0xff : 0)));
      }
      if (value < 0 && n > 1 && static_cast<uint8_t>(arg[n - 1]) == 0xff &&
          (static_cast<uint8_t>(arg[n - 2]) & 0x80) != 0) {
        arg.pop_back();
      }
      Op(op::kLong1);
      arg.insert(arg.begin(), static_cast<char>(arg.size()));
    }
    Write(arg);
  }

  // A str object seen for the first time. Returns its memo index.
  uint32_t Str(std::string_view text) {  // save_unicode
    Boundary();
    std::string header;
    if (text.size() < 256) {
      header = {static_cast<char>(op::kShortBinUnicode), static_cast<char>(text.size())};
    } else {
      header.push_back(static_cast<char>(op::kBinUnicode));
      AppendLittleEndian(&header, text.size(), 4);
    }
    WriteBytes(header, text);
    return Memoize();
  }

  void Bytes(std::string_view data) {  // save_bytes
    Boundary();
    std::string header;
    if (data.size() < 256) {
      header = {static_cast<char>(op::kShortBinBytes), static_cast<char>(data.size())};
    } else {
      header.push_back(static_cast<char>(op::kBinBytes));
      AppendLittleEndian(&header, data.size(), 4);
    }
    WriteBytes(header, data);
    Memoize();
  }

  // A class: STACK_GLOBAL the first time, BINGET afterwards. Classes of one module share the
  // module-name str (their __module__), as in CPython.
  void Global(std::string_view module, std::string_view name) {  // save_global
    Boundary();
    std::string key = std::string(module) + "\n" + std::string(name);
    if (auto it = globals_.find(key); it != globals_.end()) return Get(it->second);
    if (auto it = modules_.find(module); it != modules_.end()) {
      Boundary();
      Get(it->second);
    } else {
      modules_.emplace(module, Str(module));
    }
    Str(name);
    Op(op::kStackGlobal);
    globals_.emplace(key, Memoize());
  }

  // `cls.__new__(cls)` via copyreg.__newobj__; the caller then writes the state dict and BUILD,
  // or nothing when the instance's __dict__ is empty.
  void NewObject(std::string_view module, std::string_view name) {  // save_reduce (NEWOBJ)
    Boundary();
    Global(module, name);
    Boundary();
    Op(op::kEmptyTuple);
    Op(op::kNewObj);
    Memoize();
  }

  void Build() { Op(op::kBuild); }

  // HostUpdateResult(value): REDUCE(cls, (value,)).
  void FlagValue(int value) {  // save_reduce (REDUCE)
    Boundary();
    Global(op::kWorkerModule, "HostUpdateResult");
    Boundary();
    Int(value);
    Op(op::kTuple1);
    Memoize();
    Op(op::kReduce);
    Memoize();
  }

  // save_tuple for two items; `save_items` saves both.
  void Tuple2(const std::function<void()>& save_items) {
    Boundary();
    save_items();
    Op(op::kTuple2);
    Memoize();
  }

  // save_dict + batch_dict_exact; `save_entry(i)` saves key i then value i.
  void Dict(size_t size, const std::function<void(size_t)>& save_entry) {
    Boundary();
    Op(op::kEmptyDict);
    Memoize();
    if (size == 0) return;
    if (size == 1) {
      save_entry(0);
      Op(op::kSetItem);
      return;
    }
    size_t next = 0, in_batch = 0;
    do {
      Op(op::kMark);
      for (in_batch = 0; next < size;) {
        save_entry(next++);
        if (++in_batch == kBatchSize) break;
      }
      Op(op::kSetItems);
    } while (in_batch == kBatchSize);
  }

  // save_list + batch_list_exact; `save_item(i)` saves item i.
  void List(size_t size, const std::function<void(size_t)>& save_item) {
    Boundary();
    Op(op::kEmptyList);
    Memoize();
    if (size == 0) return;
    if (size == 1) {
      save_item(0);
      Op(op::kAppend);
      return;
    }
    size_t next = 0;
    do {
      Op(op::kMark);
      for (size_t in_batch = 0; next < size;) {
        save_item(next++);
        if (++in_batch == kBatchSize) break;
      }
      Op(op::kAppends);
    } while (next < size);
  }

 private:
  // _Pickler_OpcodeBoundary, at the start of every save().
  void Boundary() {
    if (framing_ && frame_start_ != kNoFrame &&
        out_.size() - frame_start_ - kFrameHeaderBytes >= kFrameSizeTarget) {
      CommitFrame();
    }
  }

  // _Pickler_Write: opens a frame (reserving its header) at the first write after a commit.
  void Write(std::string_view data) {
    if (framing_ && frame_start_ == kNoFrame) {
      frame_start_ = out_.size();
      out_.append(kFrameHeaderBytes, '\0');
    }
    out_.append(data);
  }

  void Op(uint8_t opcode) {
    char c = static_cast<char>(opcode);
    Write(std::string_view(&c, 1));
  }

  // _Pickler_write_bytes: payloads of 64 KiB or more go outside any frame.
  void WriteBytes(std::string_view header, std::string_view data) {
    bool bypass = data.size() >= kFrameSizeTarget;
    if (bypass) {
      CommitFrame();
      framing_ = false;
    }
    Write(header);
    Write(data);
    framing_ = true;
  }

  // _Pickler_CommitFrame.
  void CommitFrame() {
    if (!framing_ || frame_start_ == kNoFrame) return;
    size_t length = out_.size() - frame_start_ - kFrameHeaderBytes;
    if (length >= kFrameSizeMin) {
      std::string header(1, static_cast<char>(op::kFrame));
      AppendLittleEndian(&header, length, 8);
      out_.replace(frame_start_, kFrameHeaderBytes, header);
    } else {
      out_.erase(frame_start_, kFrameHeaderBytes);
    }
    frame_start_ = kNoFrame;
  }

  uint32_t Memoize() {  // memo_put
    Op(op::kMemoize);
    return memo_size_++;
  }

  void Get(uint32_t index) {  // memo_get
    std::string arg;
    if (index < 256) {
      Op(op::kBinGet);
      AppendLittleEndian(&arg, index, 1);
    } else {
      Op(op::kLongBinGet);
      AppendLittleEndian(&arg, index, 4);
    }
    Write(arg);
  }

  static constexpr size_t kNoFrame = static_cast<size_t>(-1);

  std::string out_;
  bool framing_ = true;
  size_t frame_start_ = kNoFrame;
  uint32_t memo_size_ = 0;
  std::map<std::string, uint32_t, std::less<>> modules_;  // module-name str -> memo index
  std::map<std::string, uint32_t, std::less<>> globals_;  // "module\nname" -> memo index
};

std::string EmptyInstance(std::string_view module, std::string_view name) {
  Writer writer;
  writer.NewObject(module, name);
  return writer.Finish();
}

}  // namespace

std::string EncodePingRequest() { return EmptyInstance(op::kPingModule, "PingRequest"); }

std::string EncodeAckResponse() { return EmptyInstance(op::kPingModule, "AckResponse"); }

std::string EncodePingResponse(std::string_view service_name, std::string_view source_address) {
  Writer writer;
  writer.NewObject(op::kPingModule, "PingResponse");
  writer.Dict(2, [&](size_t i) {
    writer.Str(i == 0 ? "service_name" : "source_address");
    writer.Str(i == 0 ? service_name : source_address);
  });
  writer.Build();
  return writer.Finish();
}

std::string EncodeHostsUpdatedRequest(int64_t timestamp, HostUpdateResult res) {
  Writer writer;
  writer.NewObject(op::kWorkerModule, "HostsUpdatedRequest");
  writer.Dict(2, [&](size_t i) {
    if (i == 0) {
      writer.Str("timestamp");
      writer.Int(timestamp);
    } else {
      writer.Str("res");
      writer.FlagValue(static_cast<int>(res));
    }
  });
  writer.Build();
  return writer.Finish();
}

std::string EncodeWorkerAddresses(const WorkerAddresses& addresses, std::string_view key) {
  Writer writer;
  writer.Tuple2([&] {
    writer.Dict(addresses.size(), [&](size_t i) {
      const InterfaceAddresses& interface = addresses[i];
      writer.Str(interface.name);
      writer.List(interface.addresses.size(), [&](size_t j) {
        writer.Tuple2([&] {
          writer.Str(interface.addresses[j].ip);
          writer.Int(interface.addresses[j].port);
        });
      });
    });
    writer.Bytes(key);
  });
  return writer.Finish();
}

std::string EncodeWorkerAddressesBody(const WorkerAddresses& addresses, std::string_view key) {
  return Base64Encode(EncodeWorkerAddresses(addresses, key));
}

}  // namespace etrun::rendezvous
