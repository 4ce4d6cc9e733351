// Pickle opcode bytes (CPython Lib/pickle.py, documented in Lib/pickletools.py) shared by the
// reader and the writer of rendezvous/pickle.h. Internal to pickle_reader.cc and pickle_writer.cc.
#ifndef ETRUN_RENDEZVOUS_PICKLE_OPCODES_H_
#define ETRUN_RENDEZVOUS_PICKLE_OPCODES_H_

#include <cstdint>

namespace etrun::rendezvous::pickle_op {

inline constexpr uint8_t kMark = 0x28;           // '('
inline constexpr uint8_t kEmptyTuple = 0x29;     // ')'
inline constexpr uint8_t kStop = 0x2e;           // '.'
inline constexpr uint8_t kBinBytes = 0x42;       // 'B' u32 len
inline constexpr uint8_t kShortBinBytes = 0x43;  // 'C' u8 len
inline constexpr uint8_t kBinInt = 0x4a;         // 'J' i32
inline constexpr uint8_t kBinInt1 = 0x4b;        // 'K' u8
inline constexpr uint8_t kBinInt2 = 0x4d;        // 'M' u16
inline constexpr uint8_t kNone = 0x4e;           // 'N'
inline constexpr uint8_t kReduce = 0x52;         // 'R'
inline constexpr uint8_t kBinUnicode = 0x58;     // 'X' u32 len
inline constexpr uint8_t kEmptyList = 0x5d;      // ']'
inline constexpr uint8_t kAppend = 0x61;         // 'a'
inline constexpr uint8_t kBuild = 0x62;          // 'b'
inline constexpr uint8_t kGlobal = 0x63;         // 'c' module\n name\n
inline constexpr uint8_t kAppends = 0x65;        // 'e'
inline constexpr uint8_t kBinGet = 0x68;         // 'h' u8
inline constexpr uint8_t kLongBinGet = 0x6a;     // 'j' u32
inline constexpr uint8_t kBinPut = 0x71;         // 'q' u8
inline constexpr uint8_t kLongBinPut = 0x72;     // 'r' u32
inline constexpr uint8_t kSetItem = 0x73;        // 's'
inline constexpr uint8_t kTuple = 0x74;          // 't'
inline constexpr uint8_t kSetItems = 0x75;       // 'u'
inline constexpr uint8_t kEmptyDict = 0x7d;      // '}'
inline constexpr uint8_t kProto = 0x80;          // u8
inline constexpr uint8_t kNewObj = 0x81;
inline constexpr uint8_t kTuple1 = 0x85;
inline constexpr uint8_t kTuple2 = 0x86;
inline constexpr uint8_t kTuple3 = 0x87;
inline constexpr uint8_t kNewTrue = 0x88;
inline constexpr uint8_t kNewFalse = 0x89;
inline constexpr uint8_t kLong1 = 0x8a;            // u8 n, n bytes two's complement LE
inline constexpr uint8_t kShortBinUnicode = 0x8c;  // u8 len
inline constexpr uint8_t kStackGlobal = 0x93;
inline constexpr uint8_t kMemoize = 0x94;
inline constexpr uint8_t kFrame = 0x95;  // u64 len

inline constexpr char kPingModule[] = "horovod.runner.common.util.network";
inline constexpr char kWorkerModule[] = "horovod.runner.elastic.worker";

}  // namespace etrun::rendezvous::pickle_op

#endif  // ETRUN_RENDEZVOUS_PICKLE_OPCODES_H_
