// Words for POSIX sh: quoting one word so a shell reads it back unchanged, and showing a
// command line. Pure; thread-safe.
#ifndef ETRUN_LAUNCHER_PROCESS_SHELL_WORDS_H_
#define ETRUN_LAUNCHER_PROCESS_SHELL_WORDS_H_

#include <string>
#include <vector>

namespace etrun::launcher {

// POSIX shell single-quoting of one word ('it'\''s').
std::string ShellQuote(const std::string& word);

// A command line as a shell would show it: plain words as they are, others single-quoted.
std::string JoinCommand(const std::vector<std::string>& argv);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_PROCESS_SHELL_WORDS_H_
