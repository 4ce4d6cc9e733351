#include "smoke/options.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <utility>

namespace etrun::smoke {
namespace {

constexpr size_t kMaxBytes = size_t{1} << 40;

// Splits "--name=value" into name and value; other tokens are a bare name.
std::pair<std::string, std::optional<std::string>> SplitAssignment(const std::string& token) {
  if (token.rfind("--", 0) == 0) {
    if (size_t eq = token.find('='); eq != std::string::npos) {
      return {token.substr(0, eq), token.substr(eq + 1)};
    }
  }
  return {token, std::nullopt};
}

bool ParseInt(std::string_view text, long long* value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *value);
  return ec == std::errc() && ptr == end && !text.empty();
}

bool ParseSeconds(const std::string& text, double* value) {
  // from_chars for double needs GCC 11+, which we have; strtod would accept "inf" and hex.
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *value);
  return ec == std::errc() && ptr == end && !text.empty() && std::isfinite(*value);
}

// Checks the values together, after every flag was read.
bool Validate(const SmokeOptions& o, std::string* err) {
  if (o.min_bytes < sizeof(float)) {
    *err = "-b/--minbytes: expected at least 4 bytes (one float), got " +
           std::to_string(o.min_bytes);
    return false;
  }
  if (o.min_bytes > o.max_bytes) {
    *err = "-b/--minbytes " + std::to_string(o.min_bytes) + " is larger than -e/--maxbytes " +
           std::to_string(o.max_bytes) + ": swap them";
    return false;
  }
  if (o.step_factor < 2 && o.min_bytes != o.max_bytes) {
    *err = "-f/--stepfactor: expected 2 or more, got " + std::to_string(o.step_factor);
    return false;
  }
  if (o.backend != "" && o.backend != "tcp" && o.backend != "nccl") {
    *err = "--backend: expected tcp or nccl, got '" + o.backend + "'";
    return false;
  }
  return true;
}

}  // namespace

bool ParseSize(std::string_view text, size_t* bytes) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 13) return false;
  long long value = 0;
  if (!ParseInt(text.substr(0, digits), &value)) return false;
  std::string suffix;
  for (char c : text.substr(digits)) suffix += static_cast<char>(std::toupper(c));
  if (!suffix.empty() && suffix.back() == 'B') suffix.pop_back();
  long long unit = 1;
  if (suffix == "K") {
    unit = 1LL << 10;
  } else if (suffix == "M") {
    unit = 1LL << 20;
  } else if (suffix == "G") {
    unit = 1LL << 30;
  } else if (!suffix.empty()) {
    return false;
  }
  if (value == 0 || value > static_cast<long long>(kMaxBytes) / unit) return false;
  *bytes = static_cast<size_t>(value * unit);
  return true;
}

ParseResult ParseOptions(const std::vector<std::string>& args, SmokeOptions* options,
                         std::string* err) {
  SmokeOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    auto [name, inline_value] = SplitAssignment(args[i]);
    if (name == "-h" || name == "--help") return ParseResult::kHelp;
    // Every other flag takes a value, inline ("--iters=5") or as the next word.
    const bool known = name == "-b" || name == "--minbytes" || name == "-e" ||
                       name == "--maxbytes" || name == "-f" || name == "--stepfactor" ||
                       name == "-n" || name == "--iters" || name == "-w" ||
                       name == "--warmup_iters" || name == "--backend" || name == "--timeout";
    if (!known) {
      *err = (name.rfind("-", 0) == 0 ? "unknown flag '" : "unexpected argument '") + args[i] +
             "': see etrun-smoke --help";
      return ParseResult::kError;
    }
    std::string value;
    if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      *err = name + ": expected a value";
      return ParseResult::kError;
    }
    long long number = 0;
    if (name == "-b" || name == "--minbytes" || name == "-e" || name == "--maxbytes") {
      size_t bytes = 0;
      if (!ParseSize(value, &bytes)) {
        *err = name + ": expected a size such as 8, 512K or 64M, got '" + value + "'";
        return ParseResult::kError;
      }
      (name == "-b" || name == "--minbytes" ? o.min_bytes : o.max_bytes) = bytes;
    } else if (name == "-f" || name == "--stepfactor") {
      if (!ParseInt(value, &number) || number < 1 || number > 1024) {
        *err = name + ": expected a whole number from 2 to 1024, got '" + value + "'";
        return ParseResult::kError;
      }
      o.step_factor = static_cast<size_t>(number);
    } else if (name == "-n" || name == "--iters") {
      if (!ParseInt(value, &number) || number < 1 || number > 1000000) {
        *err = name + ": expected a whole number from 1 to 1000000, got '" + value + "'";
        return ParseResult::kError;
      }
      o.iters = static_cast<int>(number);
    } else if (name == "-w" || name == "--warmup_iters") {
      if (!ParseInt(value, &number) || number < 0 || number > 1000000) {
        *err = name + ": expected a whole number from 0 to 1000000, got '" + value + "'";
        return ParseResult::kError;
      }
      o.warmup = static_cast<int>(number);
    } else if (name == "--backend") {
      o.backend = value;
    } else if (name == "--timeout") {
      if (!ParseSeconds(value, &o.timeout_s) || o.timeout_s <= 0) {
        *err = "--timeout: expected a positive number of seconds, got '" + value + "'";
        return ParseResult::kError;
      }
    }
  }
  if (!Validate(o, err)) return ParseResult::kError;
  *options = o;
  return ParseResult::kRun;
}

std::vector<size_t> SweepSizes(const SmokeOptions& options) {
  std::vector<size_t> sizes;
  for (size_t bytes = options.min_bytes; bytes <= options.max_bytes;) {
    sizes.push_back(bytes / sizeof(float) * sizeof(float));
    if (options.step_factor < 2 || bytes > options.max_bytes / options.step_factor) break;
    bytes *= options.step_factor;
  }
  return sizes;
}

std::string Usage(bool nccl_built) {
  std::string text =
      "usage: etrun -np N etrun-smoke [flags]\n"
      "\n"
      "Every rank runs an allreduce (sum, float32) over a sweep of sizes and checks each\n"
      "element of the result; rank 0 prints time, algorithm and bus bandwidth per size.\n"
      "Ranks meet through etrun's rendezvous store (HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT).\n"
      "Exit code 0: every result right; 1: a wrong result or a failure; 2: bad flags.\n"
      "\n"
      "  -b, --minbytes SIZE      smallest size (default 8; K, M, G suffixes: 64M)\n"
      "  -e, --maxbytes SIZE      largest size (default 64M)\n"
      "  -f, --stepfactor N       multiply the size by N at each step (default 2)\n"
      "  -n, --iters N            timed allreduces per size (default 20)\n"
      "  -w, --warmup_iters N     untimed allreduces per size before those (default 5)\n"
      "      --backend tcp|nccl   tcp: ring over TCP sockets between CPUs; nccl: NCCL, one GPU\n"
      "                           per local rank (default: nccl if built with it, rank 0\n"
      "                           sees a GPU and no two ranks share one, else tcp)\n"
      "      --timeout SECONDS    give up waiting for a peer after this long (default 30)\n"
      "  -h, --help               this text\n"
      "\n";
  text += nccl_built ? "backends in this build: tcp nccl\n"
                     : "backends in this build: tcp (built without CUDA/NCCL)\n";
  return text;
}

}  // namespace etrun::smoke
