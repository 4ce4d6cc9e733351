#include "cli/argv_normalizer.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <utility>

namespace etrun::cli {
namespace {

bool IsLongName(const std::string& name) { return name.size() > 2 && name.rfind("--", 0) == 0; }
bool IsMultiDashName(const std::string& name) {
  return name.size() > 2 && name[0] == '-' && name[1] != '-';
}

bool AllDigits(const std::string& s, size_t from) {
  if (from >= s.size()) return false;
  for (size_t i = from; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// argparse's _negative_number_matcher: '^-\d+$|^-\d*\.\d+$'.
bool LooksLikeNegativeNumber(const std::string& s) {
  if (s.size() < 2 || s[0] != '-') return false;
  size_t dot = s.find('.');
  if (dot == std::string::npos) return AllDigits(s, 1);
  std::string before = s.substr(1, dot - 1);
  return (before.empty() || AllDigits(before, 0)) && AllDigits(s, dot + 1);
}

// argparse treats these as positional words, never as options.
bool LooksPositional(const std::string& token) {
  return token.empty() || token[0] != '-' || token == "-" || LooksLikeNegativeNumber(token) ||
         token.find(' ') != std::string::npos;
}

// What one token turned out to be.
struct Resolution {
  enum Kind { kPositional, kOption, kError } kind = kPositional;
  int spec = -1;                     // kOption: index into the specs
  std::string spelled;               // kOption: the name as typed, for messages ("-np", "--slots")
  std::optional<std::string> value;  // kOption: a value attached with '=' or glued to "-x"
  std::string error;                 // kError
};

class Normalizer {
 public:
  explicit Normalizer(const std::vector<OptionSpec>& specs) : specs_(specs) {
    for (size_t i = 0; i < specs_.size(); ++i) {
      for (const std::string& name : specs_[i].names) by_name_[name] = static_cast<int>(i);
    }
  }

  bool Run(const std::vector<std::string>& args, NormalizedArgs* out, std::string* err) const {
    NormalizedArgs result;
    size_t i = 0;
    while (i < args.size()) {
      const std::string& token = args[i];
      if (token == "--") {
        result.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
        break;
      }
      Resolution r = Resolve(token);
      if (r.kind == Resolution::kError) {
        *err = r.error;
        return false;
      }
      if (r.kind == Resolution::kPositional) {
        result.command.assign(args.begin() + static_cast<long>(i), args.end());
        break;
      }
      ++i;
      if (!TakeValues(r, args, &i, &result.options, err)) return false;
    }
    *out = std::move(result);
    return true;
  }

 private:
  // Appends the canonical tokens of the option `r` resolved to, consuming its values from args
  // at *next.
  bool TakeValues(const Resolution& r, const std::vector<std::string>& args, size_t* next,
                  std::vector<std::string>* options, std::string* err) const {
    const OptionSpec& spec = specs_[r.spec];
    const std::string canonical = CanonicalName(spec);
    if (spec.num_values == 0) {
      if (r.value) {
        *err = "option " + r.spelled + " takes no value: remove '=" + *r.value + "'";
        return false;
      }
      options->push_back(canonical);
      return true;
    }
    if (r.value) {
      if (spec.num_values != 1) {
        *err = ExpectsValues(r.spelled, spec.num_values);
        return false;
      }
      if (r.value->empty()) {
        *err = EmptyValue(r.spelled);
        return false;
      }
      options->push_back(canonical + "=" + *r.value);
      return true;
    }
    if (spec.value_optional) {
      options->push_back(canonical);
      return true;
    }
    std::vector<std::string> values;
    while (static_cast<int>(values.size()) < spec.num_values) {
      if (*next >= args.size() || !LooksPositional(args[*next])) {
        *err = ExpectsValues(r.spelled, spec.num_values);
        return false;
      }
      if (args[*next].empty()) {
        *err = EmptyValue(r.spelled);
        return false;
      }
      values.push_back(args[(*next)++]);
    }
    if (spec.num_values == 1) {
      options->push_back(canonical + "=" + values[0]);
    } else {
      options->push_back(canonical);
      options->insert(options->end(), values.begin(), values.end());
    }
    return true;
  }

  Resolution Resolve(const std::string& token) const {
    Resolution r;
    if (token.empty() || token[0] != '-' || token == "-") return r;  // never an option
    if (auto it = by_name_.find(token); it != by_name_.end()) return Found(it->second, token, {});
    const size_t eq = token.find('=');
    const std::string head = token.substr(0, eq);
    std::optional<std::string> explicit_value;
    if (eq != std::string::npos) {
      explicit_value = token.substr(eq + 1);
      if (auto it = by_name_.find(head); it != by_name_.end()) {
        return Found(it->second, head, explicit_value);
      }
    }
    const bool is_long = token.rfind("--", 0) == 0;
    std::vector<std::string> matches;
    const int spec = PrefixMatch(head, is_long, &matches);
    if (matches.size() > 0 && spec < 0) {
      std::sort(matches.begin(), matches.end());
      std::string list;
      for (const std::string& m : matches) list += (list.empty() ? "" : ", ") + m;
      r.kind = Resolution::kError;
      r.error = "ambiguous option '" + head + "' could match " + list + ": type more of the name";
      return r;
    }
    if (spec >= 0) return Found(spec, head, explicit_value);
    if (!is_long) {
      // "-Ha:1", "-p2222": a one-letter option that takes a value, with the value glued on.
      if (auto it = by_name_.find(token.substr(0, 2));
          it != by_name_.end() && specs_[it->second].num_values > 0) {
        return Found(it->second, token.substr(0, 2), token.substr(2));
      }
      // "-np4": argparse never splits multi-letter names from their values.
      for (const OptionSpec& s : specs_) {
        if (s.num_values == 0) continue;
        for (const std::string& name : s.names) {
          if (IsMultiDashName(name) && token.size() > name.size() && token.rfind(name, 0) == 0) {
            r.kind = Resolution::kError;
            r.error = "unrecognized option '" + token + "' (did you mean " + name + " " +
                      token.substr(name.size()) + "?)";
            return r;
          }
        }
      }
    }
    // Checked after the names, as argparse does: "-1" and "-x y" are words unless they match.
    if (LooksPositional(token)) return r;
    r.kind = Resolution::kError;
    std::string suggestion = SpellcheckName(head, AllNames());
    r.error = "unrecognized option '" + head + "'";
    r.error += suggestion.empty() ? ": run 'etrun --help' to list the options"
                                  : " (did you mean " + suggestion + "?)";
    return r;
  }

  // Returns the spec whose names of the right kind start with `prefix`, or -1. *matches lists every
  // matching name; it is non-empty with -1 returned when two options match.
  int PrefixMatch(const std::string& prefix, bool is_long,
                  std::vector<std::string>* matches) const {
    int found = -1;
    bool ambiguous = false;
    if (prefix.size() <= (is_long ? 2u : 1u)) return found;  // just dashes: "--=x"
    for (size_t i = 0; i < specs_.size(); ++i) {
      for (const std::string& name : specs_[i].names) {
        const bool kind_ok = is_long ? IsLongName(name) : IsMultiDashName(name);
        if (!kind_ok || name.rfind(prefix, 0) != 0) continue;
        matches->push_back(name);
        if (found >= 0 && found != static_cast<int>(i)) ambiguous = true;
        found = static_cast<int>(i);
      }
    }
    return ambiguous ? -1 : found;
  }

  Resolution Found(int spec, std::string spelled, std::optional<std::string> value) const {
    Resolution r;
    r.kind = Resolution::kOption;
    r.spec = spec;
    r.spelled = std::move(spelled);
    r.value = std::move(value);
    return r;
  }

  std::vector<std::string> AllNames() const {
    std::vector<std::string> names;
    for (const OptionSpec& spec : specs_)
      names.insert(names.end(), spec.names.begin(), spec.names.end());
    return names;
  }

  static std::string CanonicalName(const OptionSpec& spec) {
    for (const std::string& name : spec.names) {
      if (IsLongName(name)) return name;
    }
    return spec.names.front();  // unreachable when the REQUIRES holds
  }

  static std::string ExpectsValues(const std::string& spelled, int n) {
    if (n == 1) {
      return "option " + spelled + " expects a value: put it after the option, or write " +
             spelled + "=VALUE if it starts with '-'";
    }
    return "option " + spelled + " expects " + std::to_string(n) +
           " values: put them after the option, separated by spaces";
  }

  static std::string EmptyValue(const std::string& spelled) {
    return "option " + spelled + " has an empty value: give a value or leave the option out";
  }

  const std::vector<OptionSpec>& specs_;
  std::map<std::string, int> by_name_;
};

// Optimal string alignment distance: Levenshtein plus adjacent transpositions ("--tpc" -> "--tcp").
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

bool NormalizeArgv(const std::vector<OptionSpec>& specs, const std::vector<std::string>& args,
                   NormalizedArgs* out, std::string* err) {
  return Normalizer(specs).Run(args, out, err);
}

std::string SpellcheckName(const std::string& word, const std::vector<std::string>& candidates) {
  // Allow one edit per three letters of the name proper, at least one and at most three.
  const size_t letters = word.size() - std::min(word.find_first_not_of('-'), word.size());
  const size_t allowed = std::max<size_t>(1, std::min<size_t>(3, letters / 3));
  std::string best;
  size_t best_distance = allowed + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = EditDistance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace etrun::cli
