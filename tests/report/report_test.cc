// `etrun report`'s core: events file -> JobTimeline -> summaries and SVG. Inputs are written
// here from the events file schema (the example in its text, plus variations); the SVG is read
// back with a small strict XML reader so that a broken tag or a stray '&' fails the test.
#include "report/report.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "report/pool_report.h"

using etrun::report::FormatDuration;
using etrun::report::IsPoolEvents;
using etrun::report::JobSummary;
using etrun::report::JobTimeline;
using etrun::report::ParseEvents;
using etrun::report::ParsePoolEvents;
using etrun::report::PoolJobHistory;
using etrun::report::PoolSummaryJson;
using etrun::report::PoolSummaryText;
using etrun::report::PoolTimeline;
using etrun::report::RenderPoolSvg;
using etrun::report::RenderSvg;
using etrun::report::SizeSegment;
using etrun::report::SlotsAt;
using etrun::report::SlotStep;
using etrun::report::Summarize;
using etrun::report::SummarizePool;
using etrun::report::SummaryJson;
using etrun::report::SummaryText;

namespace {

// The schema's example: an elastic job that grows from 2 to 3 ranks, loses host b, finishes.
const char kElasticExample[] =
    R"EV({"ts":"2026-11-22T07:00:00.000Z","t":0.0,"event":"job_start","job":"train","command":["python3","train.py"],"np":2,"min_np":1,"max_np":4,"elastic":true,"hosts":[],"discovery_script":"./discover.sh","pid":1234}
{"ts":"2026-11-22T07:00:00.050Z","t":0.05,"event":"discovery","hosts":[{"host":"a","slots":1},{"host":"b","slots":1}]}
{"ts":"2026-11-22T07:00:00.060Z","t":0.06,"event":"round","round":1,"world_size":2,"assignment":[{"rank":0,"host":"a","local_rank":0},{"rank":1,"host":"b","local_rank":0}]}
{"ts":"2026-11-22T07:00:00.061Z","t":0.061,"event":"rank_started","rank":0,"host":"a","local_rank":0,"pid":2001,"round":1}
{"ts":"2026-11-22T07:00:00.062Z","t":0.062,"event":"rank_started","rank":1,"host":"b","local_rank":0,"pid":2002,"round":1}
{"ts":"2026-11-22T07:00:10.000Z","t":10.0,"event":"discovery","hosts":[{"host":"a","slots":1},{"host":"b","slots":1},{"host":"c","slots":1}]}
{"ts":"2026-11-22T07:00:10.500Z","t":10.5,"event":"round","round":2,"world_size":3,"assignment":[{"rank":0,"host":"a","local_rank":0},{"rank":1,"host":"b","local_rank":0},{"rank":2,"host":"c","local_rank":0}]}
{"ts":"2026-11-22T07:00:10.501Z","t":10.501,"event":"rank_started","rank":2,"host":"c","local_rank":0,"pid":2003,"round":2}
{"ts":"2026-11-22T07:00:20.000Z","t":20.0,"event":"rank_exited","rank":1,"host":"b","local_rank":0,"pid":2002,"code":1,"signal":null,"reason":"failed"}
{"ts":"2026-11-22T07:00:20.001Z","t":20.001,"event":"host_blacklisted","host":"b","reason":"worker b[0] exited with code 1","cooldown_s":null}
{"ts":"2026-11-22T07:00:20.002Z","t":20.002,"event":"reset","resets":1,"reason":"worker b[0] exited with code 1"}
{"ts":"2026-11-22T07:00:20.600Z","t":20.6,"event":"round","round":3,"world_size":2,"assignment":[{"rank":0,"host":"a","local_rank":0},{"rank":1,"host":"c","local_rank":0}]}
{"ts":"2026-11-22T07:00:40.000Z","t":40.0,"event":"rank_exited","rank":0,"host":"a","local_rank":0,"pid":2001,"code":0,"signal":null,"reason":"finished"}
{"ts":"2026-11-22T07:00:40.010Z","t":40.01,"event":"rank_exited","rank":2,"host":"c","local_rank":0,"pid":2003,"code":0,"signal":null,"reason":"finished"}
{"ts":"2026-11-22T07:00:40.020Z","t":40.02,"event":"job_end","exit_code":0,"cause":""}
)EV";

// A static job: two ranks on localhost, rank 1 fails, rank 0 is stopped.
const char kStaticFailure[] =
    R"EV({"ts":"2026-11-22T08:00:00.000Z","t":0.0,"event":"job_start","job":"static","command":["python3","w.py"],"np":2,"min_np":null,"max_np":null,"elastic":false,"hosts":[{"host":"localhost","slots":2}],"discovery_script":null,"pid":1}
{"ts":"2026-11-22T08:00:00.010Z","t":0.01,"event":"rank_started","rank":0,"host":"localhost","local_rank":0,"pid":11,"round":0}
{"ts":"2026-11-22T08:00:00.011Z","t":0.011,"event":"rank_started","rank":1,"host":"localhost","local_rank":1,"pid":12,"round":0}
{"ts":"2026-11-22T08:00:05.000Z","t":5.0,"event":"rank_exited","rank":1,"host":"localhost","local_rank":1,"pid":12,"code":null,"signal":9,"reason":"failed"}
{"ts":"2026-11-22T08:00:05.100Z","t":5.1,"event":"rank_exited","rank":0,"host":"localhost","local_rank":0,"pid":11,"code":null,"signal":15,"reason":"stopped"}
{"ts":"2026-11-22T08:00:05.200Z","t":5.2,"event":"job_end","exit_code":137,"cause":"rank 1 on localhost was killed by signal 9 (SIGKILL)"}
)EV";

JobTimeline MustParse(const std::string& text) {
  JobTimeline timeline;
  std::string err;
  REQUIRE_MESSAGE(ParseEvents(text, "ev.jsonl", &timeline, &err), err);
  return timeline;
}

// The example with the lines that contain `needle` removed.
std::string Without(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line)) {
    if (line.find(needle) == std::string::npos) out += line + "\n";
  }
  return out;
}

// A strict little XML reader: elements, quoted attributes, the five predefined entities and
// numeric ones, an optional <?xml?> prolog. Enough to prove the SVG is well-formed.
struct Node {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // character data directly inside, entities decoded
  std::vector<Node> children;
};

class XmlReader {
 public:
  explicit XmlReader(std::string_view s) : s_(s) {}

  bool Read(Node* root, std::string* err) {
    if (s_.substr(0, 5) == "<?xml") {
      const size_t end = s_.find("?>");
      if (end == std::string_view::npos) return Fail("unterminated prolog", err);
      pos_ = end + 2;
    }
    SkipSpace();
    if (!Element(root, err)) return false;
    SkipSpace();
    if (pos_ != s_.size()) return Fail("content after the root element", err);
    return true;
  }

 private:
  bool Fail(const std::string& what, std::string* err) {
    *err = what + " at byte " + std::to_string(pos_);
    return false;
  }
  void SkipSpace() {
    while (pos_ < s_.size() && isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  std::string Name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && (isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '-' ||
                                s_[pos_] == '_' || s_[pos_] == ':')) {
      ++pos_;
    }
    return std::string(s_.substr(start, pos_ - start));
  }
  // Decodes character data up to `stop`; fails on '<' inside attributes and on bad entities.
  bool Chars(char stop, std::string* out, std::string* err) {
    while (pos_ < s_.size() && s_[pos_] != stop) {
      const char c = s_[pos_];
      if (c == '<') return Fail("'<' in an attribute value", err);
      if (c == '&') {
        const size_t semi = s_.find(';', pos_);
        if (semi == std::string_view::npos || semi - pos_ > 8) return Fail("bare '&'", err);
        const std::string_view entity = s_.substr(pos_ + 1, semi - pos_ - 1);
        static const std::map<std::string_view, char> kEntities = {
            {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
        if (auto it = kEntities.find(entity); it != kEntities.end()) {
          *out += it->second;
        } else if (entity.size() > 1 && entity[0] == '#') {
          *out += '?';
        } else {
          return Fail("unknown entity &" + std::string(entity) + ";", err);
        }
        pos_ = semi + 1;
        continue;
      }
      if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') {
        return Fail("control character", err);
      }
      *out += c;
      ++pos_;
    }
    return true;
  }
  bool Element(Node* node, std::string* err) {
    if (pos_ >= s_.size() || s_[pos_] != '<') return Fail("expected '<'", err);
    ++pos_;
    node->name = Name();
    if (node->name.empty()) return Fail("element without a name", err);
    for (;;) {
      const size_t before = pos_;
      SkipSpace();
      if (s_.substr(pos_, 2) == "/>") {
        pos_ += 2;
        return true;
      }
      if (pos_ < s_.size() && s_[pos_] == '>') {
        ++pos_;
        break;
      }
      if (pos_ == before) return Fail("expected a space before an attribute", err);
      const std::string attr = Name();
      if (attr.empty() || s_.substr(pos_, 2) != "=\"") return Fail("bad attribute", err);
      pos_ += 2;
      std::string value;
      if (!Chars('"', &value, err)) return false;
      if (pos_ >= s_.size()) return Fail("unterminated attribute", err);
      ++pos_;
      if (!node->attrs.emplace(attr, value).second) return Fail("duplicate attribute", err);
    }
    for (;;) {  // content
      if (pos_ >= s_.size()) return Fail("unclosed <" + node->name + ">", err);
      if (s_.substr(pos_, 2) == "</") {
        pos_ += 2;
        if (Name() != node->name || pos_ >= s_.size() || s_[pos_] != '>') {
          return Fail("mismatched end tag for <" + node->name + ">", err);
        }
        ++pos_;
        return true;
      }
      if (s_[pos_] == '<') {
        node->children.emplace_back();
        if (!Element(&node->children.back(), err)) return false;
        continue;
      }
      const size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] != '<') ++pos_;
      std::string text;
      XmlReader inner(s_.substr(start, pos_ - start));
      if (!inner.Chars('\0', &text, err)) return false;
      node->text += text;
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

Node MustReadSvg(const std::string& svg) {
  Node root;
  std::string err;
  REQUIRE_MESSAGE(XmlReader(svg).Read(&root, &err), err);
  REQUIRE(root.name == "svg");
  return root;
}

void Collect(const Node& node, const std::string& name, const std::string& cls,
             std::vector<const Node*>* out) {
  const auto it = node.attrs.find("class");
  if (node.name == name && (cls.empty() || (it != node.attrs.end() && it->second == cls))) {
    out->push_back(&node);
  }
  for (const Node& child : node.children) Collect(child, name, cls, out);
}
std::vector<const Node*> All(const Node& root, const std::string& name,
                             const std::string& cls = "") {
  std::vector<const Node*> out;
  Collect(root, name, cls, &out);
  return out;
}

// "x1,y1 x2,y2 ..." -> points.
std::vector<std::pair<double, double>> Points(const std::string& text) {
  std::vector<std::pair<double, double>> out;
  std::istringstream in(text);
  std::string pair;
  while (in >> pair) {
    const size_t comma = pair.find(',');
    out.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return out;
}

}  // namespace

TEST_CASE("the schema's example job becomes worlds of 2, 3 and 2 with one reset between") {
  // Given the example events file, the model has every phase with its exact times.
  const JobTimeline tl = MustParse(kElasticExample);
  CHECK(tl.has_job_start);
  CHECK(tl.has_job_end);
  CHECK(tl.job == "train");
  CHECK(tl.elastic);
  CHECK(tl.np == 2);
  CHECK(tl.min_np == 1);
  CHECK(tl.max_np == 4);
  CHECK(tl.end == doctest::Approx(40.02));
  CHECK(tl.hosts == std::vector<std::string>{"a", "b", "c"});

  struct Want {
    double start, end;
    int size;
    SizeSegment::State state;
    int round;
  } want[] = {
      {0, 0.06, 0, SizeSegment::State::kStarting, 0},
      {0.06, 10.5, 2, SizeSegment::State::kRunning, 1},
      {10.5, 20.002, 3, SizeSegment::State::kRunning, 2},
      {20.002, 20.6, 0, SizeSegment::State::kResetting, 0},
      {20.6, 40.02, 2, SizeSegment::State::kRunning, 3},
  };
  REQUIRE(tl.sizes.size() == std::size(want));
  for (size_t i = 0; i < std::size(want); ++i) {
    CAPTURE(i);
    CHECK(tl.sizes[i].start == doctest::Approx(want[i].start));
    CHECK(tl.sizes[i].end == doctest::Approx(want[i].end));
    CHECK(tl.sizes[i].size == want[i].size);
    CHECK(tl.sizes[i].state == want[i].state);
    CHECK(tl.sizes[i].round == want[i].round);
  }

  REQUIRE(tl.runs.size() == 3);
  CHECK(tl.runs[1].host == "b");
  CHECK(tl.runs[1].end == doctest::Approx(20.0));
  CHECK(tl.runs[1].reason == "failed");
  CHECK(tl.runs[1].code == 1);
  CHECK(tl.runs[2].host == "c");
  CHECK(tl.runs[2].start == doctest::Approx(10.501));
  CHECK(tl.runs[2].reason == "finished");

  REQUIRE(tl.failures.size() == 1);
  CHECK(tl.failures[0].rank == 1);
  CHECK(tl.failures[0].host == "b");
  CHECK(tl.failures[0].code == 1);
  CHECK_FALSE(tl.failures[0].signal.has_value());
  REQUIRE(tl.blacklists.size() == 1);
  CHECK(tl.blacklists[0].host == "b");
  CHECK_FALSE(tl.blacklists[0].cooldown_s.has_value());
  CHECK(tl.blacklists[0].end == doctest::Approx(40.02));  // for the rest of the job
  REQUIRE(tl.resets.size() == 1);
  CHECK(tl.resets[0].count == 1);

  // c was listed from its discovery at 10 s; a and b from 0.05 s to the end.
  REQUIRE(tl.presence.at("c").size() == 1);
  CHECK(tl.presence.at("c")[0].start == doctest::Approx(10.0));
  CHECK(tl.presence.at("c")[0].end == doctest::Approx(40.02));
}

TEST_CASE("the summary adds up the time at each size and the time lost to resets") {
  // Given the example, size 0 is the 0.06 s start plus the 0.598 s reset.
  const auto s = Summarize(MustParse(kElasticExample));
  CHECK(s.duration == doctest::Approx(40.02));
  CHECK(s.time_at_size.size() == 3);
  CHECK(s.time_at_size.at(0) == doctest::Approx(0.06 + 0.598));
  CHECK(s.time_at_size.at(2) == doctest::Approx(10.44 + 19.42));
  CHECK(s.time_at_size.at(3) == doctest::Approx(9.502));
  CHECK(s.reset_lost == doctest::Approx(0.598));
  CHECK(s.resets == 1);
  CHECK(s.ranks_started == 3);
  double total = 0;
  for (const auto& [size, seconds] : s.time_at_size) total += seconds;
  CHECK(total == doctest::Approx(s.duration));
}

TEST_CASE("the text summary of the example") {
  CHECK(SummaryText(MustParse(kElasticExample)) ==
        "job: train (elastic, np 2, min 1, max 4)\n"
        "command: python3 train.py\n"
        "started: 2026-11-22T07:00:00.000Z\n"
        "duration: 40.0 s\n"
        "exit: 0 (success)\n"
        "time at each world size:\n"
        "  size 0: 0.66 s (2%) no world: starting or resetting\n"
        "  size 2: 29.9 s (75%)\n"
        "  size 3: 9.50 s (24%)\n"
        "hosts: 3, rank processes started: 3\n"
        "resets: 1, time lost to resets: 0.60 s\n"
        "failures: 1\n"
        "  at 20.0 s: rank 1 on b exited with code 1\n"
        "blacklisted hosts: 1\n"
        "  at 20.0 s: b for the rest of the job: worker b[0] exited with code 1\n");
}

TEST_CASE("the JSON summary holds the same numbers") {
  const auto j = nlohmann::json::parse(SummaryJson(MustParse(kElasticExample)));
  CHECK(j["job"] == "train");
  CHECK(j["complete"] == true);
  CHECK(j["exit_code"] == 0);
  CHECK(j["duration_s"].get<double>() == doctest::Approx(40.02));
  REQUIRE(j["time_at_size"].size() == 3);
  CHECK(j["time_at_size"][1]["size"] == 2);
  CHECK(j["time_at_size"][1]["seconds"].get<double>() == doctest::Approx(29.86));
  CHECK(j["time_at_size"][1]["fraction"].get<double>() == doctest::Approx(0.7461));
  CHECK(j["resets"] == 1);
  CHECK(j["reset_lost_s"].get<double>() == doctest::Approx(0.598));
  REQUIRE(j["failures"].size() == 1);
  CHECK(j["failures"][0]["host"] == "b");
  CHECK(j["failures"][0]["code"] == 1);
  CHECK(j["failures"][0]["signal"].is_null());
  REQUIRE(j["blacklisted"].size() == 1);
  CHECK(j["blacklisted"][0]["cooldown_s"].is_null());
  CHECK(j["hosts"] == nlohmann::json::array({"a", "b", "c"}));
}

TEST_CASE("a static job has one world of np ranks from start to end") {
  // Given two ranks where rank 1 is killed by SIGKILL, the world is 2 for the whole job.
  const JobTimeline tl = MustParse(kStaticFailure);
  CHECK_FALSE(tl.elastic);
  REQUIRE(tl.sizes.size() == 1);
  CHECK(tl.sizes[0].size == 2);
  CHECK(tl.sizes[0].end == doctest::Approx(5.2));
  CHECK(tl.hosts == std::vector<std::string>{"localhost"});
  const auto s = Summarize(tl);
  CHECK(s.time_at_size.size() == 1);
  CHECK(s.time_at_size.at(2) == doctest::Approx(5.2));
  CHECK(s.reset_lost == 0);
  const std::string text = SummaryText(tl);
  CHECK(text.find("exit: 137 (rank 1 on localhost was killed by signal 9 (SIGKILL))\n") !=
        std::string::npos);
  CHECK(text.find("  size 2: 5.20 s (100%)\n") != std::string::npos);
  CHECK(text.find("  at 5.00 s: rank 1 on localhost was killed by signal 9 (SIGKILL)\n") !=
        std::string::npos);
}

TEST_CASE("a file without job_end ends at its last event, with ranks still running") {
  // Given the example cut after rank 0 finished (the job was killed), rank 2 never exited.
  std::string text = Without(kElasticExample, "\"job_end\"");
  text = Without(text, "\"t\":40.01,");
  const JobTimeline tl = MustParse(text);
  CHECK_FALSE(tl.has_job_end);
  CHECK(tl.end == doctest::Approx(40.0));
  CHECK_FALSE(tl.runs[2].exited);
  CHECK(tl.runs[2].end == doctest::Approx(40.0));
  CHECK(tl.sizes.back().end == doctest::Approx(40.0));
  const std::string summary = SummaryText(tl);
  CHECK(summary.find("exit: unknown: no job_end") != std::string::npos);
  CHECK(nlohmann::json::parse(SummaryJson(tl))["exit_code"].is_null());
  const std::string svg = RenderSvg(tl);
  CHECK(svg.find("still running") != std::string::npos);
  MustReadSvg(svg);
}

TEST_CASE("a reset with no round after it is lost time up to the end") {
  // Given a job that hits its reset limit: reset at 20.002, job_end at 21 without a new round.
  std::string text = Without(kElasticExample, "\"round\":3");
  text = Without(text, "\"t\":40.");
  text += R"({"t":21.0,"event":"job_end","exit_code":1,"cause":"reset limit reached"})"
          "\n";
  const auto s = Summarize(MustParse(text));
  CHECK(s.reset_lost == doctest::Approx(21.0 - 20.002));
  CHECK(s.time_at_size.at(0) == doctest::Approx(0.06 + 0.998));
}

TEST_CASE("with reset_begin and world_ready, time lost runs from training stopping to the new world") {
  // Given a job that writes when training stops (reset_begin: the first worker's reset request)
  // and goes on (world_ready: the new world's rendezvous completed), as etrun does since issue
  // 13: round events no longer switch the world, so 2.0 s are lost (10.0 -> 12.0), not the
  // 0.6 ms between reset and round that old files show.
  std::string text = Without(kElasticExample, "\"round\"");
  text = Without(text, "\"reset\"");
  text = Without(text, "\"job_end\"");
  text += R"EV({"t":0.06,"event":"round","round":1,"world_size":2,"assignment":[]}
{"t":1.5,"event":"world_ready","round":1,"world_size":2}
{"t":10.0,"event":"reset_begin","round":1,"reason":"worker a[0] left training for a reset"}
{"t":11.9,"event":"reset","resets":1,"reason":"the hosts changed"}
{"t":11.9,"event":"round","round":2,"world_size":3,"assignment":[]}
{"t":12.0,"event":"world_ready","round":2,"world_size":3}
{"t":20.0,"event":"reset_begin","round":2,"reason":"worker b[0] failed"}
{"t":20.002,"event":"reset","resets":2,"reason":"worker b[0] exited with code 1"}
{"t":20.6,"event":"round","round":3,"world_size":2,"assignment":[]}
{"t":21.5,"event":"world_ready","round":3,"world_size":2}
{"t":40.02,"event":"job_end","exit_code":0,"cause":""}
)EV";
  JobTimeline tl = MustParse(text);
  JobSummary s = Summarize(tl);
  CHECK(s.reset_lost == doctest::Approx(2.0 + 1.5));
  CHECK(s.time_at_size[2] == doctest::Approx((10.0 - 1.5) + (40.02 - 21.5)));
  CHECK(s.time_at_size[3] == doctest::Approx(20.0 - 12.0));
  CHECK(s.time_at_size[0] == doctest::Approx(1.5 + 2.0 + 1.5));  // starting, then two resets
  CHECK(SummaryText(tl).find("resets: 2, time lost to resets: 3.50 s") != std::string::npos);
}

TEST_CASE("unknown events and unknown fields are ignored") {
  // Given extra fields on every line and an event type this reader does not know, the model is
  // the same as without them.
  std::string text;
  std::istringstream in(kElasticExample);
  for (std::string line; std::getline(in, line);) {
    text += line.substr(0, line.size() - 1) + R"(,"future":{"x":[1,2]},"gpu":"H100"})" + "\n";
  }
  text += R"({"t":30.0,"event":"checkpoint","step":100})"
          "\n";
  const JobTimeline tl = MustParse(text);
  const JobTimeline plain = MustParse(kElasticExample);
  CHECK(SummaryText(tl) == SummaryText(plain));
  CHECK(RenderSvg(tl) == RenderSvg(plain));

  // An unknown event still moves the end of a file without job_end.
  const JobTimeline open =
      MustParse(Without(kElasticExample, "job_end") + R"({"t":45.5,"event":"heartbeat"})"
                                                      "\n");
  CHECK(open.end == doctest::Approx(45.5));
}

TEST_CASE("events are placed by their time, not their line") {
  // Given the example with two lines swapped, the model is unchanged.
  std::vector<std::string> lines;
  std::istringstream in(kElasticExample);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::swap(lines[3], lines[4]);
  std::swap(lines[8], lines[10]);
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  CHECK(SummaryText(MustParse(text)) == SummaryText(MustParse(kElasticExample)));
}

TEST_CASE("malformed lines are errors naming the file and the line") {
  const std::string start = R"({"t":0,"event":"job_start","job":"j"})"
                            "\n";
  struct Case {
    std::string line;
    const char* want;
  } cases[] = {
      {"[1,2]", "ev.jsonl line 2: expected a JSON object, got an array"},
      {"42", "ev.jsonl line 2: expected a JSON object, got an integer"},
      {R"({"t":1})", "ev.jsonl line 2: no \"event\" string"},
      {R"({"t":1,"event":7})", "ev.jsonl line 2: no \"event\" string"},
      {R"({"event":"reset"})", "ev.jsonl line 2: reset has no \"t\""},
      {R"({"t":"1","event":"reset"})",
       "ev.jsonl line 2: reset: \"t\" should be a number, not a string"},
      {R"({"t":1,"event":"rank_started","host":"a"})",
       "ev.jsonl line 2: rank_started has no \"rank\""},
      {R"({"t":1,"event":"rank_started","rank":"3","host":"a"})",
       "ev.jsonl line 2: rank_started: \"rank\" should be an integer, not a string"},
      {R"({"t":1,"event":"rank_started","rank":1.5,"host":"a"})",
       "ev.jsonl line 2: rank_started: \"rank\" should be an integer, not a number"},
      {R"({"t":1,"event":"rank_started","rank":99999999999,"host":"a"})",
       "ev.jsonl line 2: rank_started: \"rank\" is out of range"},
      {R"({"t":1,"event":"rank_exited","rank":1,"host":"a","code":1})",
       "ev.jsonl line 2: rank_exited has no \"reason\""},
      {R"({"t":1,"event":"round","round":1})", "ev.jsonl line 2: round has no \"world_size\""},
      {R"({"t":1,"event":"discovery","hosts":["a"]})",
       "ev.jsonl line 2: discovery: every entry of \"hosts\" needs a \"host\" string"},
      {R"({"t":1,"event":"host_blacklisted","host":"a","cooldown_s":"10"})",
       "ev.jsonl line 2: host_blacklisted: \"cooldown_s\" should be a number, not a string"},
      {R"({"t":1,"event":"job_end"})", "ev.jsonl line 2: job_end has no \"exit_code\""},
      {R"({"t":1,"event":"job_start","command":"python3 x.py"})",
       "ev.jsonl line 2: job_start: \"command\" should be an array of strings, not a string"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.line);
    JobTimeline tl;
    std::string err;
    CHECK_FALSE(ParseEvents(start + c.line + "\n", "ev.jsonl", &tl, &err));
    CHECK(err == c.want);
  }
}

TEST_CASE("a line that is not JSON is an error with its line number, blank lines counted") {
  JobTimeline tl;
  std::string err;
  CHECK_FALSE(ParseEvents("\n" + std::string(kStaticFailure).substr(0, 200) + "\n{\"t\":1}\n",
                          "ev.jsonl", &tl, &err));
  CHECK(err.rfind("ev.jsonl line 2: not valid JSON: ", 0) == 0);
  CHECK(err.find("[json.exception") == std::string::npos);
  CHECK(err.find('\n') == std::string::npos);
}

TEST_CASE("a last line cut short is skipped with a warning; with a newline it is an error") {
  // A job still writing (or killed mid-write) leaves a partial last line without a newline.
  std::string text = Without(kElasticExample, "job_end");
  text += R"({"ts":"2026-11-22T07:00:40.020Z","t":40.02,"ev)";
  JobTimeline tl;
  std::string err;
  REQUIRE(ParseEvents(text, "ev.jsonl", &tl, &err));
  CHECK_FALSE(tl.has_job_end);
  REQUIRE(tl.warnings.size() == 1);
  CHECK(tl.warnings[0] ==
        "ev.jsonl line 15: skipped an incomplete last line (no newline, not valid JSON)");
  CHECK_FALSE(ParseEvents(text + "\n", "ev.jsonl", &tl, &err));
  CHECK(err.rfind("ev.jsonl line 15: not valid JSON", 0) == 0);

  // A complete last line without a newline is read as usual.
  std::string complete = kElasticExample;
  complete.pop_back();
  REQUIRE(ParseEvents(complete, "ev.jsonl", &tl, &err));
  CHECK(tl.has_job_end);
  CHECK(tl.warnings.empty());
}

TEST_CASE("an empty file is an empty job, not an error") {
  const JobTimeline tl = MustParse("");
  CHECK_FALSE(tl.has_job_start);
  CHECK(tl.end == 0);
  CHECK(SummaryText(tl).find("duration: 0.00 s\n") != std::string::npos);
  const Node svg = MustReadSvg(RenderSvg(tl));
  CHECK(All(svg, "g", "lane").empty());
}

TEST_CASE("the SVG is well-formed, with the world size steps and one lane per host") {
  const JobTimeline tl = MustParse(kElasticExample);
  const Node svg = MustReadSvg(RenderSvg(tl));

  // One lane per host, in order, each labelled with its host name.
  const auto lanes = All(svg, "g", "lane");
  REQUIRE(lanes.size() == 3);
  for (size_t i = 0; i < lanes.size(); ++i) {
    const auto labels = All(*lanes[i], "text");
    REQUIRE_FALSE(labels.empty());
    CHECK(labels[0]->text == tl.hosts[i]);
  }
  // A bar per rank process, a failure cross and a blacklist sign on b's lane only.
  CHECK(All(svg, "rect", "bar").size() == 3);
  CHECK(All(*lanes[1], "g", "failure").size() == 1);
  CHECK(All(*lanes[1], "g", "blacklist").size() == 1);
  CHECK(All(*lanes[0], "g", "failure").empty());
  CHECK(All(svg, "g", "reset").size() == 1);

  // Two solid stretches (2 -> 3, then 2), split by the reset; dashed lines where no world is.
  const auto steps = All(svg, "polyline", "size");
  REQUIRE(steps.size() == 2);
  CHECK(All(svg, "polyline", "no-world").size() == 2);
  const auto first = Points(steps[0]->attrs.at("points"));
  const auto second = Points(steps[1]->attrs.at("points"));
  REQUIRE(first.size() == 4);   // (0.06, 2) (10.5, 2) (10.5, 3) (20.002, 3)
  REQUIRE(second.size() == 2);  // (20.6, 2) (40.02, 2)
  CHECK(first[0].second == first[1].second);
  CHECK(first[2].second < first[1].second);  // 3 is drawn above 2
  CHECK(first[1].first == first[2].first);   // the step is vertical
  CHECK(second[0].second == first[0].second);
  // x is proportional to time: the 2-world lasts 10.44 s, the 3-world 9.502 s.
  const double ratio = (first[1].first - first[0].first) / (first[3].first - first[2].first);
  CHECK(ratio == doctest::Approx(10.44 / 9.502).epsilon(0.02));
  CHECK(second[1].first > second[0].first);
}

TEST_CASE("text from the file is escaped in the SVG") {
  std::string text = kElasticExample;
  const std::string evil = R"(<b&\"c'>\u0007)";
  for (size_t at; (at = text.find("\"host\":\"c\"")) != std::string::npos;) {
    text.replace(at, 10, "\"host\":\"" + evil + "\"");
  }
  text.replace(text.find("\"job\":\"train\""), 13, "\"job\":\"</svg><x>&amp;\"");
  const JobTimeline tl = MustParse(text);
  CHECK(tl.hosts[2] == "<b&\"c'>\a");
  const Node svg = MustReadSvg(RenderSvg(tl));
  CHECK(All(*All(svg, "g", "lane")[2], "text")[0]->text == "<b&\"c'>");
  CHECK(All(svg, "title")[0]->text.find("</svg><x>&amp;") == 0);
}

TEST_CASE("50 hosts over 10 hours still fit: thin lanes, hour ticks, bars inside the plot") {
  // Given a static job of 50 hosts x 2 slots that runs 10 h, every rank finishing.
  std::string text =
      R"({"t":0,"event":"job_start","job":"big","np":100,"elastic":false,"hosts":[]})"
      "\n";
  for (int r = 0; r < 100; ++r) {
    text += "{\"t\":" + std::to_string(0.5 + r * 0.01) +
            ",\"event\":\"rank_started\",\"rank\":" + std::to_string(r) + ",\"host\":\"node" +
            std::to_string(r / 2) + "\",\"local_rank\":" + std::to_string(r % 2) +
            ",\"pid\":" + std::to_string(100 + r) + "}\n";
  }
  for (int r = 0; r < 100; ++r) {
    text += "{\"t\":" + std::to_string(36000 - r) +
            ",\"event\":\"rank_exited\",\"rank\":" + std::to_string(r) + ",\"host\":\"node" +
            std::to_string(r / 2) + "\",\"local_rank\":" + std::to_string(r % 2) +
            ",\"pid\":" + std::to_string(100 + r) +
            ",\"code\":0,\"signal\":null,\"reason\":\"finished\"}\n";
  }
  text += R"({"t":36000.5,"event":"job_end","exit_code":0,"cause":""})"
          "\n";
  const std::string rendered = RenderSvg(MustParse(text));
  const Node svg = MustReadSvg(rendered);
  CHECK(All(svg, "g", "lane").size() == 50);
  const auto bars = All(svg, "rect", "bar");
  REQUIRE(bars.size() == 100);
  const double width = std::stod(svg.attrs.at("width"));
  CHECK(std::stod(svg.attrs.at("height")) < 1200);
  for (const Node* bar : bars) {
    const double x = std::stod(bar->attrs.at("x"));
    CHECK(x > 100);
    CHECK(x + std::stod(bar->attrs.at("width")) <= width);
  }
  CHECK(rendered.find(">10:00</text>") != std::string::npos);  // hour:minute tick labels
  CHECK(rendered.find("hours:minutes since job start") != std::string::npos);
  const std::string summary = SummaryText(MustParse(text));
  CHECK(summary.find("duration: 36000.5 s (10:00:00)\n") != std::string::npos);
  CHECK(summary.find("  size 100: 36000.5 s (10:00:00, 100%)\n") != std::string::npos);
}

TEST_CASE("a one-second job gets tenth-of-a-second ticks") {
  const std::string text = R"({"t":0,"event":"job_start","job":"short","np":1,"hosts":[]}
{"t":0.1,"event":"rank_started","rank":0,"host":"localhost","local_rank":0,"pid":5}
{"t":0.9,"event":"rank_exited","rank":0,"host":"localhost","local_rank":0,"pid":5,"code":0,"reason":"finished"}
{"t":1.0,"event":"job_end","exit_code":0,"cause":""}
)";
  const std::string rendered = RenderSvg(MustParse(text));
  MustReadSvg(rendered);
  CHECK(rendered.find(">0.5</text>") != std::string::npos);
  CHECK(rendered.find(">1.0</text>") != std::string::npos);
  CHECK(rendered.find("seconds since job start") != std::string::npos);
}

TEST_CASE("durations read as seconds, with m:ss or h:mm:ss past a minute") {
  struct Case {
    double seconds;
    const char* want;
  } cases[] = {
      {0, "0.00 s"},
      {3.254, "3.25 s"},
      {12.34, "12.3 s"},
      {59.94, "59.9 s"},
      {754, "754.0 s (12:34)"},
      {3725.4, "3725.4 s (1:02:05)"},
      {29519.99999, "29520.0 s (8:12:00)"},
  };
  for (const Case& c : cases) CHECK(FormatDuration(c.seconds) == c.want);
}

// ---- The shared GPU pool's events file (`etrun pool start --events-file`). Test names start
// with "pool report:" (select them with -tc='pool report*').

namespace {

// Two jobs share 8 slots: train1 takes all 8, gives 4 to train2 when it joins, one more when
// train2's priority doubles, and leaves; train2 then grows to 8.
const char kPoolExample[] =
    R"EV({"ts":"2026-11-24T01:00:00.000Z","t":0.0,"event":"pool_start","pool":"gpus","hosts":[{"host":"localhost","slots":8,"devices":[]}],"total":8}
{"ts":"2026-11-24T01:00:01.200Z","t":1.2,"event":"pool_job_joined","job":"train1","priority":5000,"min_np":1,"max_np":8}
{"ts":"2026-11-24T01:00:01.200Z","t":1.2,"event":"pool_allocation","total":8,"held":{"train1":0},"target":{"train1":8},"queued":[]}
{"ts":"2026-11-24T01:00:01.300Z","t":1.3,"event":"pool_allocation","total":8,"held":{"train1":8},"target":{"train1":8},"queued":[]}
{"ts":"2026-11-24T01:00:09.000Z","t":9.0,"event":"pool_job_joined","job":"train2","priority":5000,"min_np":1,"max_np":8}
{"ts":"2026-11-24T01:00:09.000Z","t":9.0,"event":"pool_allocation","total":8,"held":{"train1":8,"train2":0},"target":{"train1":4,"train2":4},"queued":[]}
{"ts":"2026-11-24T01:00:11.000Z","t":11.0,"event":"pool_allocation","total":8,"held":{"train1":4,"train2":4},"target":{"train1":4,"train2":4},"queued":[]}
{"ts":"2026-11-24T01:00:20.000Z","t":20.0,"event":"pool_priority","job":"train2","priority":10000}
{"ts":"2026-11-24T01:00:20.000Z","t":20.0,"event":"pool_allocation","total":8,"held":{"train1":4,"train2":4},"target":{"train1":3,"train2":5},"queued":[]}
{"ts":"2026-11-24T01:00:21.000Z","t":21.0,"event":"pool_allocation","total":8,"held":{"train1":3,"train2":5},"target":{"train1":3,"train2":5},"queued":[]}
{"ts":"2026-11-24T01:00:35.000Z","t":35.0,"event":"pool_job_left","job":"train1","reason":"ended"}
{"ts":"2026-11-24T01:00:35.000Z","t":35.0,"event":"pool_allocation","total":8,"held":{"train2":5},"target":{"train2":8},"queued":[]}
{"ts":"2026-11-24T01:00:36.000Z","t":36.0,"event":"pool_allocation","total":8,"held":{"train2":8},"target":{"train2":8},"queued":[]}
{"ts":"2026-11-24T01:00:40.000Z","t":40.0,"event":"pool_stop"}
)EV";

PoolTimeline MustParsePool(const std::string& text) {
  PoolTimeline timeline;
  std::string err;
  REQUIRE_MESSAGE(ParsePoolEvents(text, "pool.jsonl", &timeline, &err), err);
  return timeline;
}

std::vector<std::pair<double, int>> Pairs(const std::vector<SlotStep>& steps) {
  std::vector<std::pair<double, int>> out;
  for (const SlotStep& s : steps) out.emplace_back(s.t, s.slots);
  return out;
}

// Every instant where some series changes: the sum of the jobs' held slots there, and the total.
std::vector<std::pair<int, int>> HeldAndTotal(const PoolTimeline& tl) {
  std::set<double> times;
  for (const SlotStep& s : tl.total) times.insert(s.t);
  for (const PoolJobHistory& job : tl.jobs) {
    for (const SlotStep& s : job.held) times.insert(s.t);
  }
  std::vector<std::pair<int, int>> out;
  for (const double t : times) {
    int held = 0;
    for (const PoolJobHistory& job : tl.jobs) held += SlotsAt(job.held, t);
    out.emplace_back(held, SlotsAt(tl.total, t));
  }
  return out;
}

// The shapes of a band's path data, "M x,y x,y ... Z M ... Z": each a list of points.
std::vector<std::vector<std::pair<double, double>>> Shapes(const std::string& d) {
  std::vector<std::vector<std::pair<double, double>>> out;
  std::istringstream in(d);
  for (std::string word; in >> word;) {
    if (word == "M") {
      out.emplace_back();
    } else if (word != "Z") {
      REQUIRE_FALSE(out.empty());
      out.back().push_back(Points(word)[0]);
    }
  }
  return out;
}

// The top and bottom y of a stacked band at x: each shape is flat steps, its top edge left to
// right, then its bottom edge right to left.
std::pair<double, double> BandAt(const std::string& d, double x) {
  double top = -1, bottom = -1;
  for (const auto& points : Shapes(d)) {
    for (size_t i = 0; i + 1 < points.size(); ++i) {
      const auto& [x0, y0] = points[i];
      const auto& [x1, y1] = points[i + 1];
      if (y0 != y1) continue;
      if (x0 <= x && x < x1) top = y0;
      if (x1 <= x && x < x0) bottom = y0;
    }
  }
  return {top, bottom};
}

}  // namespace

TEST_CASE("pool report: the example becomes held and target steps, priorities, joins and leaves") {
  // Given the example, each job has its steps at the allocations' times, and only the changes.
  const PoolTimeline tl = MustParsePool(kPoolExample);
  CHECK(tl.has_pool_start);
  CHECK(tl.has_pool_stop);
  CHECK(tl.pool == "gpus");
  CHECK(tl.start_ts == "2026-11-24T01:00:00.000Z");
  REQUIRE(tl.hosts.size() == 1);
  CHECK(tl.hosts[0].host == "localhost");
  CHECK(tl.hosts[0].slots == 8);
  CHECK(tl.end == doctest::Approx(40.0));
  CHECK(Pairs(tl.total) == std::vector<std::pair<double, int>>{{0.0, 8}});
  CHECK(tl.allocations.size() == 8);
  CHECK(tl.warnings.empty());

  REQUIRE(tl.jobs.size() == 2);
  const PoolJobHistory& one = tl.jobs[0];
  CHECK(one.name == "train1");
  CHECK(one.joined == doctest::Approx(1.2));
  CHECK(one.min_np == 1);
  CHECK(one.max_np == 8);
  CHECK(one.has_left);
  CHECK(one.left == doctest::Approx(35.0));
  CHECK(one.left_reason == "ended");
  CHECK(Pairs(one.held) ==
        std::vector<std::pair<double, int>>{{1.2, 0}, {1.3, 8}, {11.0, 4}, {21.0, 3}, {35.0, 0}});
  CHECK(Pairs(one.target) ==
        std::vector<std::pair<double, int>>{{1.2, 8}, {9.0, 4}, {20.0, 3}, {35.0, 0}});
  REQUIRE(one.priorities.size() == 1);
  CHECK(one.priorities[0].priority == 5000);

  const PoolJobHistory& two = tl.jobs[1];
  CHECK(two.name == "train2");
  CHECK_FALSE(two.has_left);
  CHECK(two.left == doctest::Approx(40.0));  // still in the pool when it stopped
  CHECK(Pairs(two.held) ==
        std::vector<std::pair<double, int>>{{9.0, 0}, {11.0, 4}, {21.0, 5}, {36.0, 8}});
  REQUIRE(two.priorities.size() == 2);
  CHECK(two.priorities[0].t == doctest::Approx(9.0));
  CHECK(two.priorities[0].priority == 5000);
  CHECK(two.priorities[1].t == doctest::Approx(20.0));
  CHECK(two.priorities[1].priority == 10000);
}

TEST_CASE("pool report: how jobs leave, come back, and drop out of the allocations") {
  const std::string start = R"({"t":0,"event":"pool_start","pool":"p","hosts":[],"total":8})"
                            "\n"
                            R"({"t":1,"event":"pool_job_joined","job":"a","priority":5000})"
                            "\n"
                            R"({"t":1,"event":"pool_allocation","held":{"a":6},"target":{"a":6}})"
                            "\n";
  SUBCASE("each reason is kept; a job that left without a later allocation holds 0 from then") {
    for (const char* reason : {"ended", "crashed", "lost"}) {
      CAPTURE(reason);
      const PoolTimeline tl = MustParsePool(
          start + R"({"t":5,"event":"pool_job_left","job":"a","reason":")" + reason + "\"}\n");
      REQUIRE(tl.jobs.size() == 1);
      CHECK(tl.jobs[0].left_reason == reason);
      CHECK(tl.jobs[0].left == doctest::Approx(5.0));
      // The allocation at the joining instant replaces the joining step of 0.
      CHECK(Pairs(tl.jobs[0].held) == std::vector<std::pair<double, int>>{{1, 6}, {5, 0}});
      CHECK(tl.end == doctest::Approx(5.0));  // no pool_stop: the last event ends it
      CHECK_FALSE(tl.has_pool_stop);
    }
  }
  SUBCASE("a job that joins again under the same name is a second stay") {
    const PoolTimeline tl =
        MustParsePool(start + R"({"t":5,"event":"pool_job_left","job":"a","reason":"crashed"}
{"t":5,"event":"pool_allocation","held":{},"target":{}}
{"t":8,"event":"pool_job_joined","job":"a","priority":7000}
{"t":8,"event":"pool_allocation","held":{"a":8},"target":{"a":8}}
{"t":10,"event":"pool_stop"}
)");
    REQUIRE(tl.jobs.size() == 2);
    CHECK(tl.jobs[0].left_reason == "crashed");
    CHECK(Pairs(tl.jobs[0].held) == std::vector<std::pair<double, int>>{{1, 6}, {5, 0}});
    CHECK(tl.jobs[1].joined == doctest::Approx(8.0));
    CHECK_FALSE(tl.jobs[1].has_left);
    CHECK(tl.jobs[1].priorities[0].priority == 7000);
    CHECK(Pairs(tl.jobs[1].held) == std::vector<std::pair<double, int>>{{8, 8}});
  }
  SUBCASE("a job an allocation does not name holds 0; one still named after leaving gives back") {
    const PoolTimeline tl =
        MustParsePool(start + R"({"t":2,"event":"pool_job_joined","job":"b","priority":5000}
{"t":2,"event":"pool_allocation","held":{"a":6,"b":2}}
{"t":3,"event":"pool_allocation","held":{"b":2}}
{"t":4,"event":"pool_job_left","job":"b","reason":"lost"}
{"t":4,"event":"pool_allocation","held":{"b":2}}
{"t":6,"event":"pool_allocation","held":{}}
)");
    REQUIRE(tl.jobs.size() == 2);
    CHECK(Pairs(tl.jobs[0].held) == std::vector<std::pair<double, int>>{{1, 6}, {3, 0}});
    // b's 2 slots come back at 6 s, not when it was written off as lost at 4 s.
    CHECK(Pairs(tl.jobs[1].held) == std::vector<std::pair<double, int>>{{2, 2}, {6, 0}});
    CHECK(tl.jobs[1].left == doctest::Approx(4.0));
    // Targets are untouched by allocations without "target".
    CHECK(Pairs(tl.jobs[1].target) == std::vector<std::pair<double, int>>{{2, 0}});
  }
  SUBCASE("a job in \"queued\" is queued until an allocation stops listing it, or it leaves") {
    const PoolTimeline tl = MustParsePool(
        start + R"({"t":2,"event":"pool_job_joined","job":"big","priority":5000,"min_np":4}
{"t":2,"event":"pool_allocation","held":{"a":6,"big":0},"queued":["big"]}
{"t":3,"event":"pool_job_joined","job":"late","priority":5000,"min_np":4}
{"t":3,"event":"pool_allocation","held":{"a":6},"queued":["big","late"]}
{"t":7,"event":"pool_allocation","held":{"a":4,"big":4},"queued":["late"]}
{"t":8,"event":"pool_job_left","job":"late","reason":"ended"}
{"t":9,"event":"pool_stop"}
)");
    REQUIRE(tl.jobs.size() == 3);
    REQUIRE(tl.jobs[1].queued.size() == 1);
    CHECK(tl.jobs[1].queued[0].start == doctest::Approx(2.0));
    CHECK(tl.jobs[1].queued[0].end == doctest::Approx(7.0));
    REQUIRE(tl.jobs[2].queued.size() == 1);
    CHECK(tl.jobs[2].queued[0].start == doctest::Approx(3.0));
    CHECK(tl.jobs[2].queued[0].end == doctest::Approx(8.0));
    CHECK(tl.jobs[1].min_np == 4);
    CHECK(PoolSummaryText(tl).find("    queued: from 2.00 s to 7.00 s\n") != std::string::npos);
  }
}

TEST_CASE("pool report: malformed pool lines are errors naming the file and the line") {
  const std::string start = R"({"t":0,"event":"pool_start","pool":"p","total":8})"
                            "\n";
  struct Case {
    std::string line;
    const char* want;
  } cases[] = {
      {"[1]", "pool.jsonl line 2: expected a JSON object, got an array"},
      {R"({"event":"pool_stop"})", "pool.jsonl line 2: pool_stop has no \"t\""},
      {R"({"t":1,"event":"pool_start","pool":"p"})",
       "pool.jsonl line 2: pool_start has no \"total\""},
      {R"({"t":1,"event":"pool_hosts","hosts":"a","total":4})",
       "pool.jsonl line 2: pool_hosts: \"hosts\" should be an array, not a string"},
      {R"({"t":1,"event":"pool_job_joined","priority":5000})",
       "pool.jsonl line 2: pool_job_joined has no \"job\""},
      {R"({"t":1,"event":"pool_priority","job":"a"})",
       "pool.jsonl line 2: pool_priority has no \"priority\""},
      {R"({"t":1,"event":"pool_priority","job":"a","priority":"high"})",
       "pool.jsonl line 2: pool_priority: \"priority\" should be an integer, not a string"},
      {R"({"t":1,"event":"pool_job_left","job":3})",
       "pool.jsonl line 2: pool_job_left: \"job\" should be a string, not an integer"},
      {R"({"t":1,"event":"pool_allocation","total":8})",
       "pool.jsonl line 2: pool_allocation has no \"held\""},
      {R"({"t":1,"event":"pool_allocation","held":[4,4]})",
       "pool.jsonl line 2: pool_allocation: \"held\" should be an object of integers, not an "
       "array"},
      {R"({"t":1,"event":"pool_allocation","held":{"a":"4"}})",
       "pool.jsonl line 2: pool_allocation: \"held\" should be an object of integers, not a "
       "string"},
      {R"({"t":1,"event":"pool_allocation","held":{"a":4},"target":{"a":1.5}})",
       "pool.jsonl line 2: pool_allocation: \"target\" should be an object of integers, not a "
       "number"},
      {R"({"t":1,"event":"pool_allocation","held":{"a":4},"queued":"b"})",
       "pool.jsonl line 2: pool_allocation: \"queued\" should be an array of strings, not a "
       "string"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.line);
    PoolTimeline tl;
    std::string err;
    CHECK_FALSE(ParsePoolEvents(start + c.line + "\n", "pool.jsonl", &tl, &err));
    CHECK(err == c.want);
  }

  // Not JSON: one line, with its number; cut short on the last line: a warning.
  PoolTimeline tl;
  std::string err;
  CHECK_FALSE(ParsePoolEvents(start + "{\"t\":1,\"event\":\n", "pool.jsonl", &tl, &err));
  CHECK(err.rfind("pool.jsonl line 2: not valid JSON: ", 0) == 0);
  CHECK(err.find('\n') == std::string::npos);
  REQUIRE(ParsePoolEvents(start + "{\"t\":1,\"event\":", "pool.jsonl", &tl, &err));
  CHECK(tl.warnings == std::vector<std::string>{
                           "pool.jsonl line 2: skipped an incomplete last line (no newline, not "
                           "valid JSON)"});
}

TEST_CASE("pool report: slot-seconds, averages and peaks of the example") {
  // train1: 8 slots 1.3-11, 4 to 21, 3 to 35 = 77.6 + 40 + 42 = 159.6 over 33.8 s in the pool.
  // train2: 4 slots 11-21, 5 to 36, 8 to 40 = 40 + 75 + 32 = 147 over 31 s.
  const auto s = SummarizePool(MustParsePool(kPoolExample));
  REQUIRE(s.size() == 2);
  CHECK(s[0].slot_seconds == doctest::Approx(159.6));
  CHECK(s[0].seconds_in_pool == doctest::Approx(33.8));
  CHECK(s[0].average_held == doctest::Approx(159.6 / 33.8));
  CHECK(s[0].peak_held == 8);
  CHECK(s[1].slot_seconds == doctest::Approx(147.0));
  CHECK(s[1].seconds_in_pool == doctest::Approx(31.0));
  CHECK(s[1].average_held == doctest::Approx(147.0 / 31.0));
  CHECK(s[1].peak_held == 8);
}

TEST_CASE("pool report: the text summary of the example") {
  CHECK(PoolSummaryText(MustParsePool(kPoolExample)) ==
        "pool: gpus\n"
        "started: 2026-11-24T01:00:00.000Z\n"
        "duration: 40.0 s\n"
        "total slots: 8\n"
        "hosts: localhost (8 slots)\n"
        "jobs: 2\n"
        "  train1: joined at 1.20 s (min 1, max 8), left at 35.0 s (ended)\n"
        "    priority: 5000\n"
        "    held: 159.6 slot-seconds over 33.8 s, average 4.72, peak 8\n"
        "  train2: joined at 9.00 s (min 1, max 8), still in the pool at the end\n"
        "    priority: 5000, 10000 from 20.0 s\n"
        "    held: 147.0 slot-seconds over 31.0 s, average 4.74, peak 8\n"
        "allocation changes: 8\n"
        "  at 1.20 s: train1 0 (target 8)\n"
        "  at 1.30 s: train1 8\n"
        "  at 9.00 s: train1 8 (target 4), train2 0 (target 4)\n"
        "  at 11.0 s: train1 4, train2 4\n"
        "  at 20.0 s: train1 4 (target 3), train2 4 (target 5)\n"
        "  at 21.0 s: train1 3, train2 5\n"
        "  at 35.0 s: train2 5 (target 8)\n"
        "  at 36.0 s: train2 8\n");
}

TEST_CASE("pool report: the JSON summary holds the same numbers") {
  const auto j = nlohmann::json::parse(PoolSummaryJson(MustParsePool(kPoolExample)));
  CHECK(j["pool"] == "gpus");
  CHECK(j["complete"] == true);
  CHECK(j["duration_s"].get<double>() == doctest::Approx(40.0));
  CHECK(j["total"] == nlohmann::json::parse(R"([{"t":0.0,"slots":8}])"));
  REQUIRE(j["jobs"].size() == 2);
  CHECK(j["jobs"][0]["job"] == "train1");
  CHECK(j["jobs"][0]["left"].get<double>() == doctest::Approx(35.0));
  CHECK(j["jobs"][0]["reason"] == "ended");
  CHECK(j["jobs"][0]["slot_seconds"].get<double>() == doctest::Approx(159.6));
  CHECK(j["jobs"][0]["average_held"].get<double>() == doctest::Approx(4.722));
  CHECK(j["jobs"][0]["peak_held"] == 8);
  CHECK(j["jobs"][1]["left"].is_null());
  CHECK(j["jobs"][1]["priorities"] ==
        nlohmann::json::parse(R"([{"t":9.0,"priority":5000},{"t":20.0,"priority":10000}])"));
  REQUIRE(j["allocations"].size() == 8);
  CHECK(j["allocations"][2]["held"] == nlohmann::json::parse(R"({"train1":8,"train2":0})"));
  CHECK(j["allocations"][2]["target"] == nlohmann::json::parse(R"({"train1":4,"train2":4})"));
  CHECK(j["warnings"].empty());
}

TEST_CASE("pool report: the stacked held slots never exceed the pool's total") {
  SUBCASE("the example") {
    for (const auto& [held, total] : HeldAndTotal(MustParsePool(kPoolExample))) {
      CHECK(held <= total);
    }
  }
  SUBCASE("a long pool whose hosts and jobs come and go") {
    // Given 300 allocations, written as the daemon promises (held within the total at every
    // instant), with the total changing and jobs leaving and rejoining, the parsed data keep it.
    std::mt19937 rng(12);
    std::string text = R"({"t":0,"event":"pool_start","pool":"p","hosts":[],"total":8})"
                       "\n";
    const std::vector<std::string> names = {"a", "b", "c", "d", "e"};
    std::set<std::string> in;
    for (int i = 1; i <= 300; ++i) {
      const std::string t = std::to_string(i);
      const std::string& name = names[rng() % names.size()];
      if (in.insert(name).second) {
        text += R"({"t":)" + t + R"(,"event":"pool_job_joined","job":")" + name + "\"}\n";
      } else if (rng() % 4 == 0) {
        in.erase(name);
        text += R"({"t":)" + t + R"(,"event":"pool_job_left","job":")" + name +
                R"(","reason":"ended"})" + "\n";
      }
      const int total = 4 + 4 * static_cast<int>(rng() % 3);
      int left = total;
      nlohmann::json held = nlohmann::json::object();
      for (const std::string& job : in) {
        const int slots = static_cast<int>(rng() % (left + 1));
        held[job] = slots;
        left -= slots;
      }
      text += R"({"t":)" + t + R"(,"event":"pool_hosts","total":)" + std::to_string(total) + "}\n";
      text += R"({"t":)" + t + R"(,"event":"pool_allocation","held":)" + held.dump() + "}\n";
    }
    const PoolTimeline tl = MustParsePool(text);
    CHECK(tl.jobs.size() > names.size());  // some rejoined
    CHECK(tl.warnings.empty());
    for (const auto& [held, total] : HeldAndTotal(tl)) CHECK(held <= total);
  }
  SUBCASE("a file that breaks the promise gets a warning") {
    const PoolTimeline tl = MustParsePool(
        R"({"t":0,"event":"pool_start","pool":"p","total":8}
{"t":5,"event":"pool_allocation","held":{"a":6,"b":4}}
{"t":6,"event":"pool_allocation","held":{"a":6,"b":2}}
)");
    CHECK(tl.warnings ==
          std::vector<std::string>{"pool.jsonl: at 5.00 s the jobs hold 10 slots, more than the "
                                   "pool's 8"});
  }
}

TEST_CASE("pool report: a pool's file is told apart from a job's by its pool events") {
  CHECK(IsPoolEvents(kPoolExample));
  CHECK(IsPoolEvents(R"({"t":3,"event":"pool_allocation","held":{}})"));  // no pool_start
  CHECK(IsPoolEvents("not json\n" + std::string(kPoolExample)));
  CHECK_FALSE(IsPoolEvents(kElasticExample));
  CHECK_FALSE(IsPoolEvents(R"({"t":0,"event":"job_start","job":"pool_start"})"));
  CHECK_FALSE(IsPoolEvents(""));
}

TEST_CASE("pool report: the SVG stacks one band per job under the dashed total, with a legend") {
  const std::string rendered = RenderPoolSvg(MustParsePool(kPoolExample));
  const Node svg = MustReadSvg(rendered);
  CHECK(All(svg, "title")[0]->text.find("pool gpus") == 0);

  // One band per job, named in its tooltip; nothing drawn above the pool's total.
  const auto bands = All(svg, "path", "held");
  REQUIRE(bands.size() == 2);
  CHECK(All(*bands[0], "title")[0]->text.find("train1 (priority 5000)") == 0);
  CHECK(All(*bands[1], "title")[0]->text.find("train2 (priority 5000 \u2192 10000)") == 0);
  const auto total = All(svg, "polyline", "total");
  REQUIRE(total.size() == 1);
  const auto total_points = Points(total[0]->attrs.at("points"));
  for (const Node* band : bands) {
    for (const auto& shape : Shapes(band->attrs.at("d"))) {
      for (const auto& [x, y] : shape) CHECK(y >= total_points[0].second);
    }
  }
  // Each band is one shape, where its job holds slots: train1 1.3-35 s, train2 11-40 s (on top of
  // train1's until it left, then from the axis up).
  CHECK(Shapes(bands[0]->attrs.at("d")).size() == 1);
  CHECK(Shapes(bands[1]->attrs.at("d")).size() == 1);
  // Stacked: at 28 s train1 holds 3 slots from the axis up, train2 5 more on top of it, up to
  // the total (the pool's axis runs 40 s across 800 px from x = 170).
  const double x = 170 + 28.0 / 40 * 800;
  const auto [one_top, one_bottom] = BandAt(bands[0]->attrs.at("d"), x);
  const auto [two_top, two_bottom] = BandAt(bands[1]->attrs.at("d"), x);
  CHECK(two_bottom == one_top);
  CHECK(two_top == total_points[0].second);
  CHECK((two_bottom - two_top) / (one_bottom - one_top) == doctest::Approx(5.0 / 3));
  const auto [late_top, late_bottom] = BandAt(bands[1]->attrs.at("d"), 170 + 38.0 / 40 * 800);
  CHECK(late_bottom == one_bottom);  // after train1 left, train2 sits on the axis
  CHECK(late_top == total_points[0].second);

  // The legend names each job with its priorities.
  std::vector<std::string> legend;
  for (const Node* text : All(*All(svg, "g", "legend")[0], "text")) legend.push_back(text->text);
  CHECK(legend == std::vector<std::string>{"train1 (priority 5000)",
                                           "train2 (priority 5000 \u2192 10000)", "pool total"});
  // Markers: two joins, one leave, one priority change.
  CHECK(All(svg, "g", "join").size() == 2);
  CHECK(All(svg, "g", "leave").size() == 1);
  CHECK(All(svg, "g", "priority").size() == 1);
  CHECK(All(*All(svg, "g", "leave")[0], "text")[0]->text == "\u2212train1 ended");
  CHECK(rendered.find("seconds since pool start") != std::string::npos);
}

TEST_CASE("pool report: text from the file is escaped in the pool's SVG") {
  std::string text = kPoolExample;
  for (size_t at; (at = text.find("train2")) != std::string::npos;) text.replace(at, 6, "<b&'>");
  const PoolTimeline tl = MustParsePool(text);
  CHECK(tl.jobs[1].name == "<b&'>");
  const Node svg = MustReadSvg(RenderPoolSvg(tl));
  CHECK(All(*All(svg, "g", "legend")[0], "text")[1]->text.find("<b&'>") == 0);
}

TEST_CASE("pool report: jobs' timelines below the pool's chart, on the pool's time axis") {
  // Given a job that started 10 s after the pool (by the two files' "ts"), its rank bars start
  // 10 s to the right of the axis' zero; a job without a start time gets its own axis.
  std::string job = kStaticFailure;
  job.replace(job.find("2026-11-22T08:00:00.000Z"), 24, "2026-11-24T01:00:10.000Z");
  const JobTimeline aligned = MustParse(job);
  JobTimeline alone = MustParse(kStaticFailure);
  alone.start_ts.clear();
  const std::string rendered = RenderPoolSvg(MustParsePool(kPoolExample), {aligned, alone});
  const Node svg = MustReadSvg(rendered);
  CHECK(All(svg, "path", "held").size() == 2);
  const auto lanes = All(svg, "g", "lane");
  REQUIRE(lanes.size() == 2);
  // The pool's axis runs 40 s across 800 px from x = 170; rank 0 started 0.01 s into the job.
  const auto bars = All(*lanes[0], "rect", "bar");
  REQUIRE(bars.size() == 2);
  CHECK(std::stod(bars[0]->attrs.at("x")) ==
        doctest::Approx(170 + 10.01 / 40 * 800).epsilon(0.001));
  CHECK(rendered.find("seconds since job start") != std::string::npos);  // the second job
  CHECK(std::stod(svg.attrs.at("height")) > 3 * 300);
}

TEST_CASE("pool report: a job's timeline is marked in the colour of its band in the pool") {
  // Given two runs of a job named "train1", which the pool called "train1" and "train1-2" (names
  // made unique), each job file is matched to the stay that joined as it started.
  std::string pool = kPoolExample;
  for (size_t at; (at = pool.find("train2")) != std::string::npos;) pool.replace(at, 6, "train1-2");
  std::string first = kStaticFailure, second = kStaticFailure;
  first.replace(first.find("2026-11-22T08:00:00.000Z"), 24, "2026-11-24T01:00:01.200Z");
  second.replace(second.find("2026-11-22T08:00:00.000Z"), 24, "2026-11-24T01:00:09.000Z");
  for (std::string* job : {&first, &second}) job->replace(job->find("\"static\""), 8, "\"train1\"");
  const Node svg =
      MustReadSvg(RenderPoolSvg(MustParsePool(pool), {MustParse(second), MustParse(first)}));
  const auto bars = All(svg, "rect", "job-colour");
  REQUIRE(bars.size() == 2);
  CHECK(bars[0]->attrs.at("fill") == "#ff7f0e");  // train1-2's band
  CHECK(bars[1]->attrs.at("fill") == "#1f77b4");  // train1's
}

TEST_CASE("pool report: a job file naming its pool job (pool_job) is matched by that id") {
  // The job is called "renamed" here and started as train1 joined, but its job_start says it is
  // the pool's "train2": the id wins over names and start times.
  std::string job = kStaticFailure;
  job.replace(job.find("\"static\""), 8, "\"renamed\",\"pool\":\"gpus\",\"pool_job\":\"train2\"");
  job.replace(job.find("2026-11-22T08:00:00.000Z"), 24, "2026-11-24T01:00:01.200Z");
  const Node svg = MustReadSvg(RenderPoolSvg(MustParsePool(kPoolExample), {MustParse(job)}));
  const auto bars = All(svg, "rect", "job-colour");
  REQUIRE(bars.size() == 1);
  CHECK(bars[0]->attrs.at("fill") == "#ff7f0e");  // train2's band
}
