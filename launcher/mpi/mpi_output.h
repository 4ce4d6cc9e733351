// MpiLineAssembler: whole lines out of mpirun's --tag-output stream. mpirun tags every chunk a
// rank writes, so a line its rank wrote in pieces arrives as fragments, each behind its own tag
// and glued to other ranks' fragments:
//   [1,1]<stdout>:MPI[1,0]<stdout>:MPI[1,1]<stdout>: 1[1,0]<stdout>: 0\n[1,1]<stdout>:\n
// The assembler keeps a pending line per tag (rank and stream) and emits it whole, behind the tag
// (and the timestamp, with --timestamp-output) of its first fragment, when its '\n' or '\r'
// arrives: `[1,0]<stdout>:MPI 0\n[1,1]<stdout>:MPI 1\n`. Text outside any tag (mpirun's own
// messages) passes through line by line, or through an MpirunReport that decides what of it is
// shown. At the end, unterminated lines are emitted with a '\n' added, as in Gloo mode. One
// assembler per mpirun stream. Pure; thread-compatible.
#ifndef ETRUN_LAUNCHER_MPI_MPI_OUTPUT_H_
#define ETRUN_LAUNCHER_MPI_MPI_OUTPUT_H_

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "launcher/mpi/mpirun_report.h"
#include "launcher/process/rank_set.h"

namespace etrun::launcher {

class MpiLineAssembler : public LineFramer {
 public:
  // Sees every whole tagged line as it is emitted: its tag ("[1,3]<stdout>:", without the
  // timestamp) and the line as emitted (timestamp, tag, text, terminator).
  using LineObserver = std::function<void(const std::string& tag, std::string_view line)>;

  // `timestamps`: mpirun runs with --timestamp-output, so each tag is preceded by an asctime
  // timestamp ("Mon Nov 23 23:01:52 2026"). `max_line`: a longer pending line is emitted in
  // pieces of that size (each behind its tag, ended with '\n') so memory stays bounded.
  explicit MpiLineAssembler(bool timestamps, size_t max_line = 16 << 20)
      : timestamps_(timestamps), max_line_(max_line) {}

  // Feeds bytes as read; calls `emit` with ready text (several whole lines at a time).
  void Feed(std::string_view data, const Emit& emit) override;

  // End of stream: emits what is pending.
  void Finish(const Emit& emit) override;

  void set_on_line(LineObserver observer) { on_line_ = std::move(observer); }
  // mpirun's own lines of this stream (`is_stderr`) go through `report`, which must outlive the
  // assembler, instead of straight out.
  void set_report(MpirunReport* report, bool is_stderr) {
    report_ = report;
    is_stderr_ = is_stderr;
  }

 private:
  struct Pending {
    std::string head;  // timestamp + tag of the line's first fragment
    std::string text;
  };

  // Length of the tag (with its timestamp) starting at `pos` of in_, 0 when none starts there,
  // -1 when in_ ends before it can tell.
  int TagAt(size_t pos) const;
  void Consume(std::string_view content, std::string* out);
  void Complete(const std::string& tag, Pending* line, std::string* out, bool add_newline);
  void Out(const std::string& tag, std::string* out, std::string_view head, std::string_view text,
           bool add_newline);

  bool timestamps_;
  size_t max_line_;
  std::string in_;                       // bytes not consumed yet (a possibly partial tag)
  std::string current_;                  // the tag the next content belongs to; "" untagged
  std::string current_head_;             // current_ with the timestamp it came with
  std::map<std::string, Pending> lines_;  // by tag; "" is mpirun's own text
  LineObserver on_line_;
  MpirunReport* report_ = nullptr;
  bool is_stderr_ = false;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_MPI_MPI_OUTPUT_H_
