#include "launcher/output/line_splitter.h"

#include <sys/time.h>

#include <fmt/format.h>

namespace etrun::launcher {

PrefixFormatter::PrefixFormatter(int rank, bool is_stderr, bool timestamps, TimestampFormat format)
    : prefix_(fmt::format("[{}]<{}>:", rank, is_stderr ? "stderr" : "stdout")),
      timestamps_(timestamps),
      format_(format) {}

void PrefixFormatter::AppendTimestamp(std::string* out) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  long long key = format_ == TimestampFormat::kAsctime
                      ? static_cast<long long>(now.tv_sec)
                      : static_cast<long long>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
  if (key != cached_key_) {
    struct tm local;
    localtime_r(&now.tv_sec, &local);
    char buf[64];
    if (format_ == TimestampFormat::kAsctime) {
      // time.asctime(): "Sun Nov 22 04:11:53 2026", day padded with a space.
      strftime(buf, sizeof(buf), "%a %b %e %H:%M:%S %Y", &local);
    } else {
      char date[32], zone[8];
      strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &local);
      strftime(zone, sizeof(zone), "%z", &local);
      snprintf(buf, sizeof(buf), "%s.%03ld%s ", date, now.tv_nsec / 1000000, zone);
    }
    cached_text_ = buf;
    cached_key_ = key;
  }
  out->append(cached_text_);
}

void PrefixFormatter::Append(std::string_view piece, bool terminated, std::string* out) {
  if (timestamps_) AppendTimestamp(out);
  out->append(prefix_);
  out->append(piece);
  if (!terminated) out->push_back('\n');
}

}  // namespace etrun::launcher
