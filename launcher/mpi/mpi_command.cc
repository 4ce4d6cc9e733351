#include "launcher/mpi/mpi_command.h"

#include <algorithm>
#include <string_view>

#include "launcher/worker_env.h"

namespace etrun::launcher {

bool SplitShellWords(const std::string& text, std::vector<std::string>* words, std::string* err) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;  // a word has started (even an empty '' one)
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) out.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      size_t end = text.find('\'', i + 1);
      if (end == std::string::npos) {
        *err = "unterminated ' quote";
        return false;
      }
      word.append(text, i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() &&
            std::string_view("\"\\$`\n").find(text[j + 1]) != std::string_view::npos) {
          ++j;
          if (text[j] != '\n') word += text[j];
        } else {
          word += text[j];
        }
      }
      if (j >= text.size()) {
        *err = "unterminated \" quote";
        return false;
      }
      i = j;
      in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      ++i;
      if (text[i] != '\n') word += text[i];
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) out.push_back(std::move(word));
  *words = std::move(out);
  return true;
}

bool BuildMpirunArgv(const JobConfig& config, const MpiJob& job, std::vector<std::string>* argv,
                     std::string* err) {
  std::vector<std::string> binding = {"-bind-to", "none", "-map-by", "slot"};
  if (!config.binding_args.empty() && !SplitShellWords(config.binding_args, &binding, err)) {
    *err = "--binding-args: " + *err + " in '" + config.binding_args + "': close the quote";
    return false;
  }
  std::vector<std::string> extra;
  if (!SplitShellWords(config.mpi_args, &extra, err)) {
    *err = "--mpi-args: " + *err + " in '" + config.mpi_args + "': close the quote";
    return false;
  }
  std::vector<std::string> a = {"mpirun", "--allow-run-as-root", "--tag-output",
                                "-np", std::to_string(config.num_proc.value_or(1)),
                                "-H", job.hosts};
  a.insert(a.end(), binding.begin(), binding.end());
  a.insert(a.end(), {"-mca", "pml", "ob1", "-mca", "btl", "^openib"});
  if (job.num_hosts >= kLargeClusterHosts) {
    a.insert(a.end(), {"-mca", "plm_rsh_no_tree_spawn", "true", "-mca", "plm_rsh_num_concurrent",
                       std::to_string(job.num_hosts)});
  }
  if (config.prefix_timestamp) a.push_back("--timestamp-output");
  std::string ssh;
  if (config.ssh_port) ssh = "-p " + std::to_string(*config.ssh_port);
  if (!config.ssh_identity_file.empty()) {
    ssh += (ssh.empty() ? "-i " : " -i ") + config.ssh_identity_file;
  }
  if (!ssh.empty()) a.insert(a.end(), {"-mca", "plm_rsh_args", ssh});
  if (!job.nics.empty()) {
    std::string nics;
    for (const std::string& nic : job.nics) nics += (nics.empty() ? "" : ",") + nic;
    a.insert(a.end(), {"-mca", "btl_tcp_if_include", nics, "-x", "NCCL_SOCKET_IFNAME=" + nics});
  }
  if (!config.output_filename.empty()) {
    a.insert(a.end(), {"--output-filename", config.output_filename});
  }
  std::vector<std::string> names;
  for (const std::string& kv : job.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq);
    if (IsExportable(name)) names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (std::string& name : names) a.insert(a.end(), {"-x", std::move(name)});
  a.insert(a.end(), extra.begin(), extra.end());
  a.insert(a.end(), config.command.begin(), config.command.end());
  *argv = std::move(a);
  return true;
}

}  // namespace etrun::launcher
