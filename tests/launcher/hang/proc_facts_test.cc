#include "launcher/hang/proc_facts.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <chrono>
#include <thread>

using etrun::launcher::hang::DescribeProcFacts;
using etrun::launcher::hang::ParseProcFacts;
using etrun::launcher::hang::ProcFacts;
using etrun::launcher::hang::ProcFactsText;
using etrun::launcher::hang::ReadProcFacts;

TEST_CASE("a sleeping process: state S, a wait channel, its command line") {
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  ProcFacts facts;
  for (int i = 0; i < 200; ++i) {  // until it has exec'd and sleeps
    if (ReadProcFacts(child, &facts) && facts.command == "sleep 30" && facts.state == 'S') break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(facts.state == 'S');
  CHECK(facts.command == "sleep 30");
  CHECK(DescribeProcFacts(facts).starts_with("state S (sleeping)"));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  CHECK_FALSE(ReadProcFacts(child, &facts));  // reaped: gone
}

TEST_CASE("facts travel as text and back; a newline in a value cannot add a key") {
  ProcFacts facts{'D', "io_schedule", "python3 train.py\nstate=R", "state S (sleeping): cat"};
  ProcFacts back;
  REQUIRE(ParseProcFacts(ProcFactsText(facts), &back));
  CHECK(back.state == 'D');
  CHECK(back.wchan == "io_schedule");
  CHECK(back.command == "python3 train.py state=R");
  CHECK(back.child == "state S (sleeping): cat");
  CHECK(DescribeProcFacts(back) == "state D (in uninterruptible I/O), waits in io_schedule: python3 "
                                   "train.py state=R; its child: state S (sleeping): cat");
  CHECK_FALSE(ParseProcFacts("wchan=x\n", &back));       // no state
  CHECK_FALSE(ParseProcFacts("garbage", &back));
  CHECK(ParseProcFacts("state=S\nnewer=1\n", &back));    // a key of a newer agent: ignored
}

TEST_CASE("a shell waiting for its command shows that command's state too") {
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", "sleep 30; true", static_cast<char*>(nullptr));
    _exit(127);
  }
  ProcFacts facts;
  for (int i = 0; i < 200; ++i) {
    if (ReadProcFacts(child, &facts) && !facts.child.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(facts.wchan == "do_wait");
  CHECK(facts.command == "sh -c sleep 30; true");
  CHECK(facts.child.starts_with("state S (sleeping)"));
  CHECK(facts.child.ends_with(": sleep 30"));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}
