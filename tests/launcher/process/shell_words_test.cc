#include "launcher/process/shell_words.h"

#include <doctest/doctest.h>

namespace etrun::launcher {

TEST_CASE("ShellQuote makes one word that sh reads back unchanged") {
  // Given words with quotes and spaces, each comes back single-quoted with ' as '\''.
  struct Row {
    const char* word;
    const char* quoted;
  };
  for (const Row& r : {Row{"plain", "'plain'"}, Row{"", "''"}, Row{"it's", "'it'\\''s'"},
                       Row{"a b", "'a b'"}, Row{"$HOME", "'$HOME'"}}) {
    CAPTURE(r.word);
    CHECK(ShellQuote(r.word) == r.quoted);
  }
}

TEST_CASE("JoinCommand shows plain words as they are and quotes the others") {
  CHECK(JoinCommand({"python3", "train.py", "--lr=0.1"}) == "python3 train.py --lr=0.1");
  CHECK(JoinCommand({"sh", "-c", "echo up"}) == "sh -c 'echo up'");
  CHECK(JoinCommand({"echo", ""}) == "echo ''");
}

}  // namespace etrun::launcher
