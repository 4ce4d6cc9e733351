#include "slurm/allocation.h"

#include <cctype>
#include <charconv>

namespace etrun::slurm {

namespace {

bool WholeNumber(const std::string& text, int* value) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  std::from_chars(text.data(), text.data() + text.size(), *value);
  return true;
}

// Splits at commas outside brackets.
std::vector<std::string> SplitTop(const std::string& list) {
  std::vector<std::string> parts;
  std::string part;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  }
  parts.push_back(part);
  return parts;
}

// The names one bracket range stands for ("1-3,5", "01-02").
bool ExpandRange(const std::string& inside, std::vector<std::string>* out) {
  size_t start = 0;
  while (start <= inside.size()) {
    size_t comma = inside.find(',', start);
    std::string item = inside.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t dash = item.find('-');
    std::string lo_text = item.substr(0, dash);
    std::string hi_text = dash == std::string::npos ? lo_text : item.substr(dash + 1);
    int lo = 0, hi = 0;
    if (!WholeNumber(lo_text, &lo) || !WholeNumber(hi_text, &hi) || hi < lo || hi - lo > 100000) {
      return false;
    }
    size_t width = lo_text.size();
    for (int i = lo; i <= hi; ++i) {
      std::string n = std::to_string(i);
      if (n.size() < width) n.insert(0, width - n.size(), '0');
      out->push_back(n);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

// One top-level item: literal text and bracket ranges, as a cartesian product.
bool ExpandItem(const std::string& item, std::vector<std::string>* hosts) {
  std::vector<std::string> names = {""};
  size_t i = 0;
  while (i < item.size()) {
    if (item[i] == ']') return false;
    if (item[i] != '[') {
      size_t next = item.find_first_of("[]", i);
      std::string text = item.substr(i, next == std::string::npos ? std::string::npos : next - i);
      for (std::string& n : names) n += text;
      i = next == std::string::npos ? item.size() : next;
      continue;
    }
    size_t close = item.find(']', i);
    if (close == std::string::npos) return false;
    std::vector<std::string> values;
    if (!ExpandRange(item.substr(i + 1, close - i - 1), &values)) return false;
    std::vector<std::string> product;
    for (const std::string& n : names) {
      for (const std::string& v : values) product.push_back(n + v);
    }
    names = std::move(product);
    i = close + 1;
  }
  for (std::string& n : names) {
    if (n.empty()) return false;
    hosts->push_back(std::move(n));
  }
  return true;
}

}  // namespace

bool ExpandHostList(const std::string& list, std::vector<std::string>* hosts, std::string* err) {
  hosts->clear();
  for (const std::string& item : SplitTop(list)) {
    if (!ExpandItem(item, hosts)) {
      *err = "\"" + list + "\" is not a Slurm host list like h[1-3,5],login";
      return false;
    }
  }
  for (const std::string& host : *hosts) {
    if (discovery::StartsLikeOption(host)) {
      *err = "\"" + list + "\" names node '" + host + "': " + discovery::OptionLikeHostError(host);
      hosts->clear();
      return false;
    }
  }
  return true;
}

bool ExpandTaskCounts(const std::string& spec, std::vector<int>* counts, std::string* err) {
  counts->clear();
  for (const std::string& part : SplitTop(spec)) {
    int n = 0, times = 1;
    size_t paren = part.find("(x");
    bool ok = paren == std::string::npos
                  ? WholeNumber(part, &n)
                  : part.back() == ')' && WholeNumber(part.substr(0, paren), &n) &&
                        WholeNumber(part.substr(paren + 2, part.size() - paren - 3), &times);
    if (!ok || times > 100000) {
      *err = "\"" + spec + "\" is not like 4(x2),2";
      return false;
    }
    counts->insert(counts->end(), static_cast<size_t>(times), n);
  }
  return true;
}

std::string EnvValue(const std::vector<std::string>& env, const std::string& name) {
  std::string prefix = name + "=";
  for (const std::string& kv : env) {
    if (kv.starts_with(prefix)) return kv.substr(prefix.size());
  }
  return "";
}

bool InAllocation(const std::vector<std::string>& env) {
  return !EnvValue(env, "SLURM_JOB_ID").empty() &&
         !(EnvValue(env, "SLURM_JOB_NODELIST").empty() && EnvValue(env, "SLURM_NODELIST").empty());
}

bool AllocationHosts(const std::vector<std::string>& env, std::vector<discovery::HostSlots>* hosts,
                     std::string* err) {
  std::string list = EnvValue(env, "SLURM_JOB_NODELIST");
  if (list.empty()) list = EnvValue(env, "SLURM_NODELIST");
  if (EnvValue(env, "SLURM_JOB_ID").empty() || list.empty()) {
    *err = "not inside a Slurm allocation (SLURM_JOB_ID or SLURM_JOB_NODELIST is not set): run "
           "etrun from an sbatch script or an salloc shell";
    return false;
  }
  std::vector<std::string> names;
  if (!ExpandHostList(list, &names, err)) {
    *err = "SLURM_JOB_NODELIST=" + *err;
    return false;
  }
  std::vector<int> per_node;
  int slots = 1;
  auto whole = [&](const char* name, const std::string& value) {
    if (WholeNumber(value, &slots) && slots > 0) return true;
    *err = std::string(name) + "=\"" + value + "\" is not a whole number of slots: fix it, or set "
           "ETRUN_SLURM_SLOTS";
    return false;
  };
  if (std::string v = EnvValue(env, "ETRUN_SLURM_SLOTS"); !v.empty()) {
    if (!whole("ETRUN_SLURM_SLOTS", v)) return false;
  } else if (std::string g = EnvValue(env, "SLURM_GPUS_ON_NODE"); !g.empty()) {
    if (!whole("SLURM_GPUS_ON_NODE", g)) return false;
  } else if (std::string p = EnvValue(env, "SLURM_GPUS_PER_NODE"); !p.empty()) {
    int total = 0;
    for (std::string item : SplitTop(p)) {
      item = item.substr(0, item.find('('));
      int n = 0;
      if (!WholeNumber(item.substr(item.rfind(':') == std::string::npos ? 0 : item.rfind(':') + 1), &n)) {
        *err = "SLURM_GPUS_PER_NODE=\"" + p + "\" is not like 4, a100:4 or a100:2,v100:2";
        return false;
      }
      total += n;
    }
    slots = total;
  } else if (std::string t = EnvValue(env, "SLURM_NTASKS_PER_NODE"); !t.empty()) {
    if (!whole("SLURM_NTASKS_PER_NODE", t)) return false;
  } else if (std::string c = EnvValue(env, "SLURM_TASKS_PER_NODE"); !c.empty()) {
    if (!ExpandTaskCounts(c, &per_node, err)) {
      *err = "SLURM_TASKS_PER_NODE=" + *err;
      return false;
    }
  }
  hosts->clear();
  for (size_t i = 0; i < names.size(); ++i) {
    int n = i < per_node.size() ? per_node[i] : slots;
    if (n > 0) hosts->push_back({names[i], n});
  }
  if (hosts->empty()) {
    *err = "the Slurm allocation has no slots (SLURM_JOB_NODELIST=" + list + "): set ETRUN_SLURM_SLOTS";
    return false;
  }
  return true;
}

bool SlotsCountGpus(const std::vector<std::string>& env) {
  return EnvValue(env, "ETRUN_SLURM_SLOTS").empty() &&
         !(EnvValue(env, "SLURM_GPUS_ON_NODE").empty() && EnvValue(env, "SLURM_GPUS_PER_NODE").empty());
}

std::string SrunTemplate(const std::string& job_id) {
  // --overlap: ranks' steps share the allocation's CPUs and memory (Slurm >= 20.11); one task on
  // {host}; --quiet keeps srun's own notes off the rank's stderr.
  return "srun --overlap --jobid=" + job_id + " --nodes=1 --ntasks=1 --nodelist={host} --quiet";
}

}  // namespace etrun::slurm
