// Helpers shared by the verbs (`status`, `list`, `scale`, `pool`): one error line, CLI11
// parsing with the house's exit codes, aligned tables, durations.
#ifndef ETRUN_CLI_VERB_COMMON_H_
#define ETRUN_CLI_VERB_COMMON_H_

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace etrun::cli {

// Prints "etrun: error: <what>" to stderr; returns `code`.
int Error(const std::string& what, int code);

// Runs CLI11 on a verb's arguments. Returns -1 to go on, else the exit code (help: 0, error: 2).
int Parse(CLI::App& app, int argc, char** argv);

// "42s", "3m07s", "1h02m03s".
std::string Duration(double seconds);

// Rows as columns aligned by two spaces.
std::string Table(const std::vector<std::vector<std::string>>& rows);

// A JSON value for a table cell: "-" for null, strings bare.
std::string Text(const nlohmann::json& j);

// "10m", "90s", "1h", "2.5" (seconds). Returns false on anything else, or a value <= 0.
bool ParseDuration(const std::string& text, double* seconds);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_VERB_COMMON_H_
