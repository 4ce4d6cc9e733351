#include "launcher/agent/wire.h"

#include <cstdio>

#include <charconv>

namespace etrun::launcher::agent {

namespace {

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

void AppendFrame(std::string* out, char op, uint32_t id, std::string_view data) {
  out->push_back(op);
  PutU32(out, id);
  PutU32(out, static_cast<uint32_t>(data.size()));
  out->append(data);
}

void AppendFlushedFrame(std::string* out, char op, uint32_t id, std::string_view data) {
  AppendFrame(out, op, id, data);
  if (out->back() != '\n') AppendFrame(out, kNewline, 0, "\n");
}

std::string ExitText(const ExitStatus& status, int64_t at_us) {
  std::string text = status.kind == ExitStatus::Kind::kSignaled ? "s" + std::to_string(status.signal)
                                                                : "c" + std::to_string(status.code);
  if (at_us >= 0) text += "@" + std::to_string(at_us);
  return text;
}

bool ParseExitText(std::string_view text, ExitStatus* status, int64_t* at_us) {
  int64_t at = -1;
  if (size_t sep = text.find('@'); sep != std::string_view::npos) {
    std::string_view us = text.substr(sep + 1);
    auto [end, ec] = std::from_chars(us.data(), us.data() + us.size(), at);
    if (ec != std::errc() || end != us.data() + us.size() || at < 0) return false;
    text = text.substr(0, sep);
  }
  if (at_us != nullptr) *at_us = at;
  if (text.size() < 2 || (text[0] != 'c' && text[0] != 's')) return false;
  int n = 0;
  auto [end, ec] = std::from_chars(text.data() + 1, text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 0 || n > 255) return false;
  *status = text[0] == 'c' ? ExitStatus::Exited(n) : ExitStatus::Signaled(n);
  return true;
}

std::string GpuShareText(const GpuShare& share) {
  return std::to_string(share.gpus_per_rank) + " " + std::to_string(share.ranks_per_gpu) + " " +
         std::to_string(share.local_rank);
}

bool ParseGpuShare(std::string_view text, GpuShare* share) {
  int values[3] = {};
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (int i = 0; i < 3; ++i) {
    if (i > 0 && (p == end || *p++ != ' ')) return false;
    auto [next, ec] = std::from_chars(p, end, values[i]);
    if (ec != std::errc() || values[i] < 0 || values[i] > 1 << 20) return false;
    p = next;
  }
  GpuShare parsed{values[0], values[1], values[2]};
  // Exactly one of the two flags.
  if (p != end || (parsed.gpus_per_rank > 0) == (parsed.ranks_per_gpu > 0)) return false;
  *share = parsed;
  return true;
}

bool FrameReader::Feed(std::string_view data, const std::function<void(Frame&)>& on_frame) {
  buffer_.append(data);
  size_t at = 0;
  Frame frame;
  while (buffer_.size() - at >= kFrameHeader) {
    const char* p = buffer_.data() + at;
    uint32_t length = GetU32(p + 5);
    if (length > kMaxFrameData) {
      buffer_.clear();
      return false;
    }
    if (buffer_.size() - at < kFrameHeader + length) break;
    frame.op = p[0];
    frame.id = GetU32(p + 1);
    frame.data.assign(p + kFrameHeader, length);
    at += kFrameHeader + length;
    on_frame(frame);
  }
  buffer_.erase(0, at);
  return true;
}

std::string RankStartText(const RankStart& start) {
  std::string out;
  auto item = [&out](char tag, std::string_view text) {
    out += tag;
    out.append(text);
    out += '\0';
  };
  item('C', start.cwd);
  for (const std::string& kv : start.env) item('E', kv);
  for (const std::string& a : start.argv) item('A', a);
  const HostNetwork& net = start.network;
  if (net.resolve) item('R', "");
  if (!net.launcher_address.empty()) item('L', net.launcher_address);
  if (start.ssh_connection) item('S', "");
  for (const std::string& v : net.address_vars) item('V', v);
  for (const std::string& v : net.interface_vars) item('I', v);
  if (!net.require_interface.empty()) item('N', net.require_interface);
  return out;
}

bool ParseRankStart(std::string_view text, RankStart* start, std::string* err) {
  RankStart s;
  bool cwd = false;
  while (!text.empty()) {
    size_t end = text.find('\0');
    if (end == std::string_view::npos) {
      *err = "an item without its end";
      return false;
    }
    char tag = text[0];
    std::string value(text.substr(1, end - 1));
    text.remove_prefix(end + 1);
    switch (tag) {
      case 'C': s.cwd = std::move(value); cwd = true; break;
      case 'E':
        if (value.find('=') == std::string::npos || value.front() == '=') {
          *err = "a variable without a name";
          return false;
        }
        s.env.push_back(std::move(value));
        break;
      case 'A': s.argv.push_back(std::move(value)); break;
      case 'R': s.network.resolve = true; break;
      case 'L': s.network.launcher_address = std::move(value); break;
      case 'S': s.ssh_connection = true; break;
      case 'V': s.network.address_vars.push_back(std::move(value)); break;
      case 'I': s.network.interface_vars.push_back(std::move(value)); break;
      case 'N': s.network.require_interface = std::move(value); break;
      default:
        *err = std::string("an unknown item '") + tag + "'";
        return false;
    }
  }
  if (!cwd || s.argv.empty() || s.argv.front().empty()) {
    *err = "no directory or no command";
    return false;
  }
  *start = std::move(s);
  return true;
}

}  // namespace etrun::launcher::agent
