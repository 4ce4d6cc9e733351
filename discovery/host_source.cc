#include "discovery/host_source.h"

#include "discovery/discovery_output.h"

namespace etrun::discovery {

namespace {

// The last `max_lines` lines of `text` on one line.
std::string TailLines(const std::string& text, size_t max_lines) {
  std::string out = text;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  size_t pos = out.size();
  for (size_t i = 0; i < max_lines && pos != std::string::npos && pos > 0; ++i) {
    pos = out.rfind('\n', pos - 1);
  }
  if (pos != std::string::npos && pos > 0) out = out.substr(pos + 1);
  for (char& c : out) {
    if (c == '\n') c = ' ';
  }
  return out;
}

}  // namespace

HostGrant GrantFromScript(const ScriptResult& result, int default_slots) {
  HostGrant grant;
  grant.errors = result.errors;
  std::string err;
  if (!result.ok) {
    grant.failure = "the host discovery script failed (" + result.failure + ")";
    if (!result.errors.empty()) grant.failure += ": " + TailLines(result.errors, 3);
  } else if (!ParseDiscoveryOutput(result.output, default_slots, &grant.hosts, &grant.warnings, &err)) {
    grant.failure = "the host discovery script printed a bad " + err;
  } else {
    grant.ok = true;
  }
  if (!grant.ok) grant.fix = "fix the script; it must print host:slots lines";
  for (std::string& w : grant.warnings) w = "host discovery script " + w;
  return grant;
}

void ScriptHostSource::Poll(std::function<void(HostGrant)> done) {
  runner_->Run([this, done = std::move(done)](ScriptResult result) {
    done(GrantFromScript(result, default_slots_));
  });
}

FixedHostSource::FixedHostSource(const std::vector<HostSlots>& hosts) {
  grant_.ok = true;
  grant_.hosts = hosts;
  CapSlots(&grant_.hosts, &grant_.warnings);
}

}  // namespace etrun::discovery
