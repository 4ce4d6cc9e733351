#include "launcher/mpi/mpi_output.h"

#include <cctype>

namespace etrun::launcher {
namespace {

// The shape of an asctime timestamp: A letter, D digit, N digit or space, others literal.
constexpr std::string_view kStampShape = "AAA AAA ND DD:DD:DD DDDD";

bool Fits(char shape, char c) {
  switch (shape) {
    case 'A': return std::isalpha(static_cast<unsigned char>(c)) != 0;
    case 'D': return std::isdigit(static_cast<unsigned char>(c)) != 0;
    case 'N': return c == ' ' || std::isdigit(static_cast<unsigned char>(c)) != 0;
    default: return c == shape;
  }
}

// Matches `[J,R]<name>:` at text[p...]. Returns its end, 0 on a mismatch, -1 when text ends
// before it can tell.
long MatchTag(std::string_view text, size_t p) {
  // Sections: '[' digits ',' digits ']' '<' letters '>' ':'
  auto at = [&](size_t i) { return i < text.size() ? text[i] : '\0'; };
  if (p >= text.size()) return -1;
  if (text[p++] != '[') return 0;
  for (char sep : {',', ']'}) {
    size_t digits = 0;
    while (p < text.size() && std::isdigit(static_cast<unsigned char>(text[p]))) ++p, ++digits;
    if (p >= text.size()) return -1;
    if (digits == 0 || digits > 10 || text[p++] != sep) return 0;
  }
  if (p >= text.size()) return -1;
  if (text[p++] != '<') return 0;
  size_t letters = 0;
  while (p < text.size() && std::isalpha(static_cast<unsigned char>(text[p]))) ++p, ++letters;
  if (p + 1 >= text.size()) return -1;
  if (letters == 0 || letters > 8 || at(p) != '>' || at(p + 1) != ':') return 0;
  return static_cast<long>(p + 2);
}

}  // namespace

int MpiLineAssembler::TagAt(size_t pos) const {
  size_t p = pos;
  if (timestamps_) {
    for (char shape : kStampShape) {
      if (p >= in_.size()) return -1;
      if (!Fits(shape, in_[p++])) return 0;
    }
  }
  long end = MatchTag(in_, p);
  return end <= 0 ? static_cast<int>(end) : static_cast<int>(end - static_cast<long>(pos));
}

void MpiLineAssembler::Feed(std::string_view data, const Emit& emit) {
  in_.append(data);
  std::string out;
  size_t i = 0, start = 0;  // in_[start, i) is content not consumed yet
  while (i < in_.size()) {
    char c = in_[i];
    bool candidate = timestamps_ ? std::isupper(static_cast<unsigned char>(c)) != 0 : c == '[';
    if (candidate) {
      int len = TagAt(i);
      if (len < 0) break;  // maybe a tag: wait for the rest
      if (len > 0) {
        Consume(std::string_view(in_).substr(start, i - start), &out);
        current_head_ = in_.substr(i, len);
        current_ = timestamps_ ? current_head_.substr(kStampShape.size()) : current_head_;
        i += len;
        start = i;
        continue;
      }
    }
    ++i;
    if (c == '\n' || c == '\r') {
      Consume(std::string_view(in_).substr(start, i - start), &out);
      start = i;
      // mpirun tags every line it reads: after a '\n' untagged text is its own. A '\r' inside
      // one chunk gets no new tag, so the rank goes on.
      if (c == '\n') current_.clear(), current_head_.clear();
    }
  }
  Consume(std::string_view(in_).substr(start, i - start), &out);
  in_.erase(0, i);
  if (!out.empty()) emit(out);
}

void MpiLineAssembler::Consume(std::string_view content, std::string* out) {
  if (content.empty()) return;
  Pending& line = lines_[current_];
  if (line.text.empty()) line.head = current_head_;
  line.text.append(content);
  char last = content.back();
  if (last == '\n' || last == '\r') return Complete(current_, &line, out, false);
  while (line.text.size() >= max_line_) {  // a runaway line: bounded pieces
    Out(current_, out, line.head, std::string_view(line.text).substr(0, max_line_),
        !line.head.empty());
    line.text.erase(0, max_line_);
  }
}

void MpiLineAssembler::Complete(const std::string& tag, Pending* line, std::string* out,
                                bool add_newline) {
  Out(tag, out, line->head, line->text, add_newline);
  line->text.clear();
  line->head.clear();
}

void MpiLineAssembler::Out(const std::string& tag, std::string* out, std::string_view head,
                           std::string_view text, bool add_newline) {
  if (tag.empty() && report_ != nullptr) {  // mpirun's own: the report decides what is shown
    std::string line(head);
    line.append(text);
    if (add_newline) line.push_back('\n');
    return report_->Line(is_stderr_, line, out);
  }
  size_t start = out->size();
  out->append(head);
  out->append(text);
  if (add_newline) out->push_back('\n');
  if (on_line_ && !tag.empty()) on_line_(tag, std::string_view(*out).substr(start));
}

void MpiLineAssembler::Finish(const Emit& emit) {
  std::string out;
  if (!in_.empty()) {  // a partial tag that never completed is text
    Consume(in_, &out);
    in_.clear();
  }
  for (auto& [tag, line] : lines_) {
    if (!line.text.empty()) Complete(tag, &line, &out, !tag.empty());
  }
  lines_.clear();
  if (report_ != nullptr) report_->Finish(is_stderr_, &out);
  if (!out.empty()) emit(out);
}

}  // namespace etrun::launcher
