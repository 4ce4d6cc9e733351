// event_reader: the JSON Lines loop and field access shared by the job and pool reports.
#include "report/event_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "events/schema.h"

namespace etrun::report {

namespace field = events::field;
using nlohmann::json;

const char* JsonTypeName(const json& value) {
  if (value.is_number_integer()) return "an integer";
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  if (value.is_boolean()) return "a boolean";
  return "null";
}

std::optional<int> FieldReader::ToInt(const char* key, const json& v) {
  const int64_t n = v.is_number_unsigned()
                        ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX))
                        : v.get<int64_t>();
  if (n >= std::numeric_limits<int>::min() && n <= std::numeric_limits<int>::max()) {
    return static_cast<int>(n);
  }
  if (error_.empty()) error_ = fmt::format("{}: \"{}\" is out of range", event_, key);
  return std::nullopt;
}

std::optional<int> FieldReader::OptInt(const char* key, bool required) {
  const json* v = Find(key, required);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) return ToInt(key, *v);
  Fail(key, "an integer", *v);
  return std::nullopt;
}

std::optional<double> FieldReader::OptNum(const char* key, bool required) {
  const json* v = Find(key, required);
  if (v == nullptr) return std::nullopt;
  if (v->is_number()) return v->get<double>();
  Fail(key, "a number", *v);
  return std::nullopt;
}

std::string FieldReader::Str(const char* key, bool required) {
  const json* v = Find(key, required);
  if (v == nullptr) return "";
  if (v->is_string()) return v->get<std::string>();
  Fail(key, "a string", *v);
  return "";
}

bool FieldReader::Bool(const char* key) {
  const json* v = Find(key, false);
  if (v == nullptr) return false;
  if (v->is_boolean()) return v->get<bool>();
  Fail(key, "true or false", *v);
  return false;
}

std::vector<std::string> FieldReader::Strings(const char* key) {
  std::vector<std::string> out;
  const json* v = Find(key, false);
  if (v == nullptr) return out;
  if (!v->is_array()) return Fail(key, "an array of strings", *v), out;
  for (const json& item : *v) {
    if (!item.is_string()) return Fail(key, "an array of strings", item), out;
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::vector<std::string> FieldReader::HostNames(const char* key, bool required) {
  std::vector<std::string> out;
  for (auto& [host, slots] : HostSlots(key, required)) out.push_back(std::move(host));
  return out;
}

std::vector<std::pair<std::string, int>> FieldReader::HostSlots(const char* key, bool required) {
  std::vector<std::pair<std::string, int>> out;
  const json* v = Find(key, required);
  if (v == nullptr) return out;
  if (!v->is_array()) return Fail(key, "an array", *v), out;
  for (const json& item : *v) {
    const json::const_iterator host =
        item.is_object() ? item.find(field::kHost) : json::const_iterator();
    if (!item.is_object() || host == item.end() || !host->is_string()) {
      if (error_.empty()) {
        error_ = fmt::format("{}: every entry of \"{}\" needs a \"host\" string", event_, key);
      }
      return out;
    }
    // Slots are read only where they are shown (the pool's hosts); a job's host lists keep
    // whatever the writer put there.
    int slots = 0;
    if (const auto s = item.find(field::kSlots); s != item.end() && s->is_number_integer()) {
      const int64_t n =
          s->is_number_unsigned()
              ? static_cast<int64_t>(std::min<uint64_t>(s->get<uint64_t>(), INT64_MAX))
              : s->get<int64_t>();
      if (n > 0 && n <= std::numeric_limits<int>::max()) slots = static_cast<int>(n);
    }
    out.emplace_back(host->get<std::string>(), slots);
  }
  return out;
}

std::map<std::string, int> FieldReader::IntMap(const char* key, bool required) {
  std::map<std::string, int> out;
  const json* v = Find(key, required);
  if (v == nullptr) return out;
  if (!v->is_object()) return Fail(key, "an object of integers", *v), out;
  for (const auto& [name, value] : v->items()) {
    if (!value.is_number_integer()) return Fail(key, "an object of integers", value), out;
    out[name] = ToInt(key, value).value_or(0);
  }
  return out;
}

const json* FieldReader::Find(const char* key, bool required) {
  const json::const_iterator it = object_.find(key);
  if (it == object_.end() || it->is_null()) {
    if (required && error_.empty()) error_ = fmt::format("{} has no \"{}\"", event_, key);
    return nullptr;
  }
  return &*it;
}

void FieldReader::Fail(const char* key, const char* want, const json& got) {
  if (!error_.empty()) return;
  error_ = fmt::format("{}: \"{}\" should be {}, not {}", event_, key, want, JsonTypeName(got));
}

namespace {

// "column 5: syntax error while parsing value - invalid literal; last read: 'x'" from
// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
std::string ParseErrorText(const std::string& what) {
  std::string text = what;
  if (const size_t bracket = text.find("] "); bracket != std::string::npos) {
    text = text.substr(bracket + 2);
  }
  for (const char* noise : {"parse error at line 1, ", "parse error at "}) {
    if (text.rfind(noise, 0) == 0) text = text.substr(strlen(noise));
  }
  return text;
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

}  // namespace

bool ForEachEvent(std::string_view text, const std::string& name, const EventLineFn& on_event,
                  std::vector<std::string>* warnings, std::string* err) {
  int line_number = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t newline = text.find('\n', pos);
    const bool terminated = newline != std::string_view::npos;
    const std::string_view line = text.substr(pos, terminated ? newline - pos : text.npos);
    pos = terminated ? newline + 1 : text.size();
    ++line_number;
    if (IsBlank(line)) continue;
    const std::string where = fmt::format("{} line {}", name, line_number);
    json object;
    try {
      object = json::parse(line);
    } catch (const json::parse_error& e) {
      if (terminated) {
        *err = fmt::format("{}: not valid JSON: {}", where, ParseErrorText(e.what()));
        return false;
      }
      // A write cut short: the writer is still writing or was killed mid-line.
      warnings->push_back(
          fmt::format("{}: skipped an incomplete last line (no newline, not valid JSON)", where));
      return true;
    }
    if (!object.is_object()) {
      *err = fmt::format("{}: expected a JSON object, got {}", where, JsonTypeName(object));
      return false;
    }
    const json::const_iterator type_it = object.find(field::kEvent);
    if (type_it == object.end() || !type_it->is_string()) {
      *err = fmt::format("{}: no \"event\" string", where);
      return false;
    }
    if (!on_event(object, type_it->get<std::string>(), where, err)) return false;
  }
  return true;
}

}  // namespace etrun::report
