#include "smoke/report.h"

#include <cstdio>

namespace etrun::smoke {

double AlgorithmBandwidth(size_t bytes, double time_us) {
  return time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e3) : 0;
}

double BusBandwidth(double algbw, int size) { return algbw * 2.0 * (size - 1) / size; }

std::string TableHeader() {
  return "#       size         count      type   redop       time     algbw     busbw  #wrong\n"
         "#        (B)    (elements)                         (us)    (GB/s)    (GB/s)\n";
}

std::string FormatRow(const SizeResult& result, int size) {
  const double algbw = AlgorithmBandwidth(result.bytes, result.time_us);
  char line[160];
  std::snprintf(line, sizeof(line), "%12zu  %12zu  %8s  %6s  %9.2f  %8.3f  %8.3f  %6lld\n",
                result.bytes, result.count, "float", "sum", result.time_us, algbw,
                BusBandwidth(algbw, size), static_cast<long long>(result.wrong));
  return line;
}

std::string Summary(const std::vector<SizeResult>& results, int size) {
  double busbw = 0;
  long long wrong = 0;
  for (const SizeResult& r : results) {
    busbw += BusBandwidth(AlgorithmBandwidth(r.bytes, r.time_us), size);
    wrong += r.wrong;
  }
  if (!results.empty()) busbw /= static_cast<double>(results.size());
  char text[200];
  std::snprintf(text, sizeof(text),
                "# Avg bus bandwidth    : %.3f GB/s\n# Wrong elements       : %lld (%s)\n", busbw,
                wrong, wrong == 0 ? "OK" : "FAILED");
  return text;
}

}  // namespace etrun::smoke
