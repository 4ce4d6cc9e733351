// `etrun report`'s core: events file -> JobTimeline -> summaries and SVG. Inputs are written
// here from the events file schema (the example in its text, plus variations); the SVG is read
// back with a small strict XML reader so that a broken tag or a stray '&' fails the test.
#include "report/report.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

using etrun::report::FormatDuration;
using etrun::report::JobSummary;
using etrun::report::JobTimeline;
using etrun::report::ParseEvents;
using etrun::report::RenderSvg;
using etrun::report::SizeSegment;
using etrun::report::Summarize;
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
