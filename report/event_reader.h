// event_reader: what the job report (report.cc) and the pool report (pool_report.cc) share when
// they read an events file: the JSON Lines loop (blank lines, a write cut short on the last line,
// errors that name the file and the line) and typed, checked access to one event's fields.
// Internal to report/; pure; thread-compatible.
#ifndef ETRUN_REPORT_EVENT_READER_H_
#define ETRUN_REPORT_EVENT_READER_H_

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace etrun::report {

// "an integer", "a string", "null"...: what a JSON value is, for error messages.
const char* JsonTypeName(const nlohmann::json& value);

// Typed access to one event's fields. The first problem is kept in error() (without the line
// prefix: `round has no "world_size"`); later reads return defaults, so a decoder can read every
// field and check once. An absent field and a null one are the same.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& object, std::string event)
      : object_(object), event_(std::move(event)) {}

  const std::string& error() const { return error_; }

  int Int(const char* key) { return OptInt(key, /*required=*/true).value_or(0); }
  std::optional<int> OptInt(const char* key, bool required = false);
  double Num(const char* key) { return OptNum(key, /*required=*/true).value_or(0); }
  std::optional<double> OptNum(const char* key, bool required = false);
  std::string Str(const char* key, bool required = true);
  bool Bool(const char* key);
  std::vector<std::string> Strings(const char* key);
  // The "host" members of an array of objects (job_start/discovery "hosts", round "assignment").
  std::vector<std::string> HostNames(const char* key, bool required);
  // The "host" and "slots" members of an array of objects (pool_start "hosts"); slots 0 when an
  // entry has none.
  std::vector<std::pair<std::string, int>> HostSlots(const char* key, bool required);
  // An object of integers, {"train1": 4} (pool_allocation "held", "target").
  std::map<std::string, int> IntMap(const char* key, bool required);

 private:
  // The field, or nullptr when it is absent or null (an error if required).
  const nlohmann::json* Find(const char* key, bool required);
  void Fail(const char* key, const char* want, const nlohmann::json& got);
  std::optional<int> ToInt(const char* key, const nlohmann::json& v);

  const nlohmann::json& object_;
  std::string event_;
  std::string error_;
};

// Called for each line that holds a JSON object with an "event" string: `where` is
// "<name> line <n>". Returns false with *err (the whole one-line message) to stop the reading.
using EventLineFn = std::function<bool(const nlohmann::json& object, const std::string& event,
                                       const std::string& where, std::string* err)>;

// Reads an events file's text line by line and hands each event to `on_event`. Blank lines are
// skipped. A last line without a newline that is not valid JSON is a write cut short (the writer
// is still writing, or was killed mid-line): a warning is added to *warnings and reading stops
// there. Returns false with *err ("<name> line <n>: <what>") for any other line that is not
// JSON, not an object, or has no "event" string, or when `on_event` returns false.
bool ForEachEvent(std::string_view text, const std::string& name, const EventLineFn& on_event,
                  std::vector<std::string>* warnings, std::string* err);

}  // namespace etrun::report

#endif  // ETRUN_REPORT_EVENT_READER_H_
