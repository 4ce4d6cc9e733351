// Splits a rank's byte stream into pieces that end at '\n' or '\r' (spec §7.1) and formats
// horovodrun's `[<rank>]<stdout>:` prefix. Byte-transparent: no decoding, NUL and invalid UTF-8
// pass through. Pure; one splitter per stream; thread-compatible.
#ifndef ETRUN_LAUNCHER_OUTPUT_LINE_SPLITTER_H_
#define ETRUN_LAUNCHER_OUTPUT_LINE_SPLITTER_H_

#include <cstring>
#include <ctime>
#include <string>
#include <string_view>

namespace etrun::launcher {

// Timestamp prefix style for --prefix-output-with-timestamp (spec §7.1). kAsctime is horovodrun's
// `time.asctime()` form; kIso is etrun's opt-in ISO 8601 local time with milliseconds.
enum class TimestampFormat { kAsctime, kIso };


class LineSplitter {
 public:
  // A line longer than `max_line` bytes without a terminator is emitted in pieces of that size
  // (each unterminated) so one runaway stream cannot exhaust memory.
  explicit LineSplitter(size_t max_line = 16 << 20) : max_line_(max_line) {}

  // Feeds bytes. Calls emit(std::string_view piece, bool terminated) for every complete piece,
  // terminator included; keeps an unterminated tail for the next call.
  template <typename Emit>
  void Feed(std::string_view data, Emit&& emit);

  // End of stream: emits the unterminated tail, if any, with terminated == false.
  template <typename Emit>
  void Finish(Emit&& emit) {
    if (!pending_.empty()) emit(std::string_view(pending_), false);
    pending_.clear();
  }

  size_t pending_size() const { return pending_.size(); }

 private:
  size_t max_line_;
  std::string pending_;
};

// Builds the text put before each piece: an optional timestamp, then `[rank]<stdout>:`.
class PrefixFormatter {
 public:
  PrefixFormatter(int rank, bool is_stderr, bool timestamps, TimestampFormat format);

  // Appends prefix + piece (+ '\n' when the piece is unterminated) to *out.
  void Append(std::string_view piece, bool terminated, std::string* out);

 private:
  void AppendTimestamp(std::string* out);

  std::string prefix_;
  bool timestamps_;
  TimestampFormat format_;
  // The formatted timestamp is cached for the second (asctime) or millisecond (iso) it shows.
  long long cached_key_ = -1;
  std::string cached_text_;
};

template <typename Emit>
void LineSplitter::Feed(std::string_view data, Emit&& emit) {
  const char* p = data.data();
  const char* end = p + data.size();
  // Search '\r' once per call and only again after passing it: most output has none.
  const char* next_cr = static_cast<const char*>(std::memchr(p, '\r', end - p));
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', end - p));
    if (next_cr != nullptr && next_cr < p) next_cr = static_cast<const char*>(std::memchr(p, '\r', end - p));
    const char* cut = nl;
    if (next_cr != nullptr && (cut == nullptr || next_cr < cut)) cut = next_cr;
    if (cut == nullptr) {
      pending_.append(p, end - p);
      while (pending_.size() >= max_line_) {
        emit(std::string_view(pending_).substr(0, max_line_), false);
        pending_.erase(0, max_line_);
      }
      return;
    }
    std::string_view piece(p, cut + 1 - p);
    if (pending_.empty()) {
      emit(piece, true);
    } else {
      pending_.append(piece);
      emit(std::string_view(pending_), true);
      pending_.clear();
    }
    p = cut + 1;
  }
}

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_OUTPUT_LINE_SPLITTER_H_
