// The mpirun command line of --mpi against horovodrun's own (spec §8.3): etrun's argv must be the
// words horovodrun's /bin/sh makes of its command string, for the spec's generated examples.
#include "launcher/mpi/mpi_command.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "launcher/mpi/mpi_policy.h"

using etrun::JobConfig;
using etrun::launcher::AddOpenMpiEnv;
using etrun::launcher::BuildMpirunArgv;
using etrun::launcher::MpiFlavor;
using etrun::launcher::MpiJob;
using etrun::launcher::SplitShellWords;

namespace {

using Strings = std::vector<std::string>;

Strings Words(const std::string& line) {
  Strings words;
  std::string err;
  REQUIRE(SplitShellWords(line, &words, &err));
  return words;
}

Strings Build(const JobConfig& config, const MpiJob& job) {
  Strings argv;
  std::string err;
  REQUIRE(BuildMpirunArgv(config, job, &argv, &err));
  return argv;
}

// The spec's examples: -np 4 -H h1:2,h2:2, env FOO and PATH, --log-level (HOROVOD_LOG_LEVEL),
// --network-interface eth0, command `python train.py --arg 'a b'`.
JobConfig SpecConfig() {
  JobConfig c;
  c.num_proc = 4;
  c.hosts_flag = "h1:2,h2:2";
  c.tunables.log_level = "INFO";
  c.network_interfaces = {"eth0"};
  c.command = {"python", "train.py", "--arg", "a b"};
  return c;
}

MpiJob SpecJob() {
  MpiJob job;
  job.hosts = "h1:2,h2:2";
  job.num_hosts = 2;
  job.nics = {"eth0"};
  job.env = {"PATH=/usr/bin", "FOO=bar", "HOROVOD_LOG_LEVEL=INFO"};
  return job;
}

}  // namespace

TEST_CASE("the default Open MPI command is horovodrun's, word for word") {
  // Given the spec's first example, the argv equals what /bin/sh makes of horovodrun's string.
  CHECK(Build(SpecConfig(), SpecJob()) ==
        Words("mpirun --allow-run-as-root --tag-output -np 4 -H h1:2,h2:2 -bind-to none -map-by "
              "slot -mca pml ob1 -mca btl ^openib  -mca btl_tcp_if_include eth0 -x "
              "NCCL_SOCKET_IFNAME=eth0  -x FOO -x HOROVOD_LOG_LEVEL -x PATH  python train.py "
              "--arg 'a b'"));
}

TEST_CASE("binding args, timestamps, ssh options, output directory and mpi args land where horovodrun puts them") {
  // Given the spec's second example.
  JobConfig c = SpecConfig();
  c.binding_args = "--rankfile f";
  c.prefix_timestamp = true;
  c.ssh_port = 2222;
  c.ssh_identity_file = "/k";
  c.output_filename = "out";
  c.mpi_args = "--map-by ppr:6:node";
  Strings argv = Build(c, SpecJob());
  CHECK(argv ==
        Words("mpirun --allow-run-as-root --tag-output -np 4 -H h1:2,h2:2 --rankfile f -mca pml "
              "ob1 -mca btl ^openib --timestamp-output -mca plm_rsh_args \"-p 2222 -i /k\" -mca "
              "btl_tcp_if_include eth0 -x NCCL_SOCKET_IFNAME=eth0 --output-filename out -x FOO -x "
              "HOROVOD_LOG_LEVEL -x PATH --map-by ppr:6:node python train.py --arg 'a b'"));
  // The ssh options are one word, as mpirun reads them.
  CHECK(std::find(argv.begin(), argv.end(), "-p 2222 -i /k") != argv.end());
}

TEST_CASE("ssh options alone, and no interfaces, leave out what is not given") {
  JobConfig c = SpecConfig();
  c.ssh_identity_file = "/home/u/.ssh/id";
  MpiJob job = SpecJob();
  job.nics.clear();
  job.env = {"PATH=/bin"};
  CHECK(Build(c, job) == Strings{"mpirun", "--allow-run-as-root", "--tag-output", "-np", "4", "-H",
                                 "h1:2,h2:2", "-bind-to", "none", "-map-by", "slot", "-mca", "pml",
                                 "ob1", "-mca", "btl", "^openib", "-mca", "plm_rsh_args",
                                 "-i /home/u/.ssh/id", "-x", "PATH", "python", "train.py", "--arg",
                                 "a b"});
  c.ssh_identity_file.clear();
  c.ssh_port = 22;
  Strings argv = Build(c, job);
  CHECK(std::find(argv.begin(), argv.end(), "-p 22") != argv.end());
}

TEST_CASE("64 hosts or more add Open MPI's large-cluster flags after the impl flags") {
  JobConfig c = SpecConfig();
  c.prefix_timestamp = true;
  MpiJob job = SpecJob();
  for (int hosts : {63, 64, 200}) {
    CAPTURE(hosts);
    job.num_hosts = hosts;
    Strings argv = Build(c, job);
    auto at = std::find(argv.begin(), argv.end(), "^openib");
    REQUIRE(at != argv.end());
    Strings after(at + 1, at + (hosts >= 64 ? 8 : 2));
    if (hosts < 64) {
      CHECK(after == Strings{"--timestamp-output"});
    } else {
      CHECK(after == Strings{"-mca", "plm_rsh_no_tree_spawn", "true", "-mca",
                             "plm_rsh_num_concurrent", std::to_string(hosts),
                             "--timestamp-output"});
    }
  }
}

TEST_CASE("-x lists every exportable variable once, sorted, and never the excluded ones (spec 3.3)") {
  JobConfig c;
  c.num_proc = 2;
  c.command = {"a.out"};
  MpiJob job;
  job.hosts = "localhost:2";
  job.env = {"ZED=1", "BASH_FUNC_f%%=() { :; }", "OLDPWD=/", "MY_CUDA_VISIBLE_DEVICES_X=1",
             "CUDA_VISIBLE_DEVICES=0", "_HOROVOD_SECRET_KEY=s", "ALPHA=a=b", "ZED=2", "=junk",
             "no_equals", "Mixed=1"};
  Strings argv = Build(c, job);
  Strings xs;
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "-x") xs.push_back(argv[i + 1]);
  }
  CHECK(xs == Strings{"ALPHA", "Mixed", "ZED"});
  CHECK(Strings(argv.end() - 1, argv.end()) == Strings{"a.out"});
}

TEST_CASE("the command's words reach mpirun untouched") {
  JobConfig c;
  c.num_proc = 1;
  c.command = {"python3", "-c", "print('$HOME *')", "", "a\"b", "-np", "9"};
  MpiJob job;
  job.hosts = "localhost:1";
  Strings argv = Build(c, job);
  CHECK(Strings(argv.end() - 7, argv.end()) == c.command);
}

TEST_CASE("--mpi-args and --binding-args split as a shell splits them, without expansions") {
  const std::vector<std::pair<std::string, Strings>> cases = {
      {"", {}},
      {"   ", {}},
      {"-x  A=1\t-x B", {"-x", "A=1", "-x", "B"}},
      {"--mca btl 'self,vader, tcp'", {"--mca", "btl", "self,vader, tcp"}},
      {"-x \"A=a b\" -x B=\"\"", {"-x", "A=a b", "-x", "B="}},
      {"''", {""}},
      {"a'b'\"c\"d", {"abcd"}},
      {"\"\\\"q\\\" \\$X \\\\ \\a\"", {"\"q\" $X \\ \\a"}},
      {"a\\ b \\'c", {"a b", "'c"}},
      {"$HOME ~ *", {"$HOME", "~", "*"}},
      {"'it''s'", {"its"}},
  };
  for (const auto& [text, words] : cases) {
    CAPTURE(text);
    CHECK(Words(text) == words);
  }
  Strings words = {"unchanged"};
  std::string err;
  CHECK_FALSE(SplitShellWords("-x 'A=1", &words, &err));
  CHECK(err == "unterminated ' quote");
  CHECK_FALSE(SplitShellWords("-x \"A=1\\\"", &words, &err));
  CHECK(err == "unterminated \" quote");
  CHECK(words == Strings{"unchanged"});
}

TEST_CASE("an unclosed quote in --mpi-args or --binding-args is an error naming the flag") {
  JobConfig c = SpecConfig();
  c.mpi_args = "-x 'A";
  Strings argv;
  std::string err;
  CHECK_FALSE(BuildMpirunArgv(c, SpecJob(), &argv, &err));
  CHECK(err == "--mpi-args: unterminated ' quote in '-x 'A': close the quote");
  c.mpi_args.clear();
  c.binding_args = "--bind-to \"core";
  CHECK_FALSE(BuildMpirunArgv(c, SpecJob(), &argv, &err));
  CHECK(err == "--binding-args: unterminated \" quote in '--bind-to \"core': close the quote");
  CHECK(argv.empty());
}

TEST_CASE("mpirun --version output names the MPI flavour as horovodrun tests it") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n",
       "Open MPI"},
      {"mpirun (OpenRTE) 2.1.1\n", "Open MPI"},
      {"mpirun (IBM Spectrum MPI) 10.3.1.2\n", "IBM Spectrum MPI"},
      {"HYDRA build details:\n    Version: 4.0.2\n    Release Date: ...\n  MPICH\n", "MPICH"},
      {"Intel(R) MPI Library for Linux* OS, Version 2021.6\n", "Intel(R) MPI"},
      {"HYDRA build details:\n    Version: 4.0.2\n", ""},
      {"", ""},
  };
  for (const auto& [output, flavor] : cases) {
    CAPTURE(output);
    CHECK(MpiFlavor(output) == flavor);
  }
}

TEST_CASE("etrun's Open MPI settings never override the user's own") {
  // Given no setting, it is added (and so forwarded with -x); given the user's, it is kept.
  Strings env = {"PATH=/bin"};
  CHECK(AddOpenMpiEnv(etrun::launcher::kNoSingleCopy, &env));
  CHECK(env == Strings{"PATH=/bin", "OMPI_MCA_btl_vader_single_copy_mechanism=none"});
  env = {"OMPI_MCA_btl_vader_single_copy_mechanism=cma"};
  CHECK_FALSE(AddOpenMpiEnv(etrun::launcher::kNoSingleCopy, &env));
  CHECK(env == Strings{"OMPI_MCA_btl_vader_single_copy_mechanism=cma"});
  env = {"OMPI_MCA_btl_vader_single_copy_mechanism_x=1"};
  CHECK(AddOpenMpiEnv(etrun::launcher::kNoSingleCopy, &env));
  CHECK(env.size() == 2);
}
