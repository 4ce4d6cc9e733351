#include "discovery/host_slots.h"

#include <charconv>
#include <set>

namespace etrun::discovery {
namespace {

// Parses a non-negative decimal slot count that fits an int.
bool ParseSlots(std::string_view text, int* slots) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *slots);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool AddHost(std::vector<HostSlots>* out, std::set<std::string>* seen, std::string_view name,
             int slots, std::string* err) {
  if (!seen->insert(std::string(name)).second) {
    *err = "host '" + std::string(name) + "' is listed twice: give each host once with its total slots";
    return false;
  }
  out->push_back({std::string(name), slots});
  return true;
}

}  // namespace

bool IsValidHostName(std::string_view name) {
  if (name.empty() || StartsLikeOption(name)) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool StartsLikeOption(std::string_view name) { return name.starts_with('-'); }

std::string OptionLikeHostError(std::string_view name) {
  return "host names cannot begin with '-' (ssh or a remote shell would read '" +
         std::string(name) + "' as an option)";
}

std::string_view TrimWhitespace(std::string_view text) {
  const char* ws = " \t\r\n\v\f";
  size_t b = text.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return text.substr(b, text.find_last_not_of(ws) - b + 1);
}

bool ParseHostsFlag(std::string_view text, std::vector<HostSlots>* hosts, std::string* err) {
  std::vector<HostSlots> parsed;
  std::set<std::string> seen;
  size_t pos = 0;
  while (true) {
    size_t comma = text.find(',', pos);
    std::string_view element = TrimWhitespace(text.substr(pos, comma == std::string_view::npos ? text.npos : comma - pos));
    size_t colon = element.rfind(':');
    int slots = 0;
    if (StartsLikeOption(element)) {
      *err = "invalid host '" + std::string(element) + "' in -H '" + std::string(text) + "': " +
             OptionLikeHostError(element.substr(0, colon)) +
             ": give each host's name or address, like worker-0:2,worker-1:2";
      return false;
    }
    if (colon == std::string_view::npos || !IsValidHostName(element.substr(0, colon)) ||
        !ParseSlots(element.substr(colon + 1), &slots)) {
      *err = "invalid host '" + std::string(element) + "' in -H '" + std::string(text) +
             "': expected host:slots pairs like worker-0:2,worker-1:2";
      return false;
    }
    if (!AddHost(&parsed, &seen, element.substr(0, colon), slots, err)) return false;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  *hosts = std::move(parsed);
  return true;
}

bool ParseHostfile(std::string_view path, std::string_view contents,
                   std::vector<HostSlots>* hosts, std::string* err) {
  std::vector<HostSlots> parsed;
  std::set<std::string> seen;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= contents.size()) {
    size_t nl = contents.find('\n', pos);
    std::string_view line = contents.substr(pos, nl == std::string_view::npos ? contents.npos : nl - pos);
    pos = nl == std::string_view::npos ? contents.size() + 1 : nl + 1;
    ++line_no;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = TrimWhitespace(line);
    if (line.empty()) continue;
    std::string where = std::string(path) + " line " + std::to_string(line_no) + ": ";

    // Split into whitespace-separated fields.
    std::vector<std::string_view> fields;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
      if (i > start) fields.push_back(line.substr(start, i - start));
    }
    if (StartsLikeOption(fields[0])) {
      *err = where + "invalid host name '" + std::string(fields[0]) + "': " +
             OptionLikeHostError(fields[0]) +
             ": give the host's name or address, like 'worker-0 slots=4'";
      return false;
    }
    if (!IsValidHostName(fields[0])) {
      *err = where + "invalid host name '" + std::string(fields[0]) +
             "': expected a line like 'worker-0 slots=4'";
      return false;
    }
    int slots = 1;
    bool have_slots = false;
    for (size_t f = 1; f < fields.size(); ++f) {
      std::string_view field = fields[f];
      size_t eq = field.find('=');
      std::string_view key = field.substr(0, eq);
      std::string_view value = eq == std::string_view::npos ? std::string_view() : field.substr(eq + 1);
      int number = 0;
      if (eq == std::string_view::npos || (key != "slots" && key != "max_slots")) {
        *err = where + "unexpected '" + std::string(field) +
               "': expected a line like 'worker-0 slots=4'";
        return false;
      }
      if (!ParseSlots(value, &number)) {
        *err = where + "'" + std::string(field) + "' is not a whole number of slots: write e.g. " +
               std::string(key) + "=4";
        return false;
      }
      if (key == "slots") {
        if (have_slots) {
          *err = where + "slots= is given twice: keep one";
          return false;
        }
        slots = number;
        have_slots = true;
      }
      // max_slots (Open MPI's oversubscription cap) is accepted for compatibility: etrun never
      // starts more ranks on a host than its slots, so it has nothing to add.
    }
    if (!AddHost(&parsed, &seen, fields[0], slots, err)) {
      *err = where + *err;
      return false;
    }
  }
  if (parsed.empty()) {
    *err = std::string(path) + ": no hosts in hostfile: add lines like 'worker-0 slots=4'";
    return false;
  }
  *hosts = std::move(parsed);
  return true;
}

int64_t TotalSlots(const std::vector<HostSlots>& hosts) {
  int64_t total = 0;
  for (const HostSlots& h : hosts) total += h.slots;
  return total;
}

std::string FormatHosts(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const HostSlots& h : hosts) {
    if (!out.empty()) out += ',';
    out += h.name + ":" + std::to_string(h.slots);
  }
  return out;
}

}  // namespace etrun::discovery
