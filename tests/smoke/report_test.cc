// The table rank 0 prints: nccl-tests' columns and bandwidth definitions.
#include "smoke/report.h"

#include <doctest/doctest.h>

#include "smoke/sweep.h"

using etrun::smoke::AlgorithmBandwidth;
using etrun::smoke::BusBandwidth;
using etrun::smoke::SizeResult;

TEST_CASE("bus bandwidth is algbw x 2(n-1)/n, and zero for one rank") {
  // 1 GB in 1 s is 1 GB/s; a ring of 4 moves 1.5x that over each link.
  CHECK(AlgorithmBandwidth(1000000000, 1e6) == doctest::Approx(1.0));
  CHECK(AlgorithmBandwidth(1000, 0) == 0);
  CHECK(BusBandwidth(1.0, 4) == doctest::Approx(1.5));
  CHECK(BusBandwidth(2.0, 2) == doctest::Approx(2.0));
  CHECK(BusBandwidth(2.0, 1) == 0);
}

TEST_CASE("rows line up under the header's columns") {
  SizeResult r;
  r.bytes = 1048576;
  r.count = 262144;
  r.time_us = 1048.576;
  r.wrong = 3;
  const std::string row = etrun::smoke::FormatRow(r, 2);
  CHECK(row ==
        "     1048576        262144     float     sum    1048.58     1.000     1.000       3\n");
  const std::string header = etrun::smoke::TableHeader();
  const std::string first = header.substr(0, header.find('\n') + 1);
  CHECK(first.size() == row.size());
  // Each column name ends where its values end.
  for (const char* name : {"size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong"}) {
    CAPTURE(name);
    const size_t end = first.find(name) + std::string(name).size();
    CHECK(row[end - 1] != ' ');
    CHECK((row[end] == ' ' || row[end] == '\n'));
  }
}

TEST_CASE("the summary averages bus bandwidth and counts wrong elements") {
  SizeResult a{1000, 250, 1.0, 0};  // 1 GB/s
  SizeResult b{3000, 750, 1.0, 0};  // 3 GB/s
  CHECK(etrun::smoke::Summary({a, b}, 2) ==
        "# Avg bus bandwidth    : 2.000 GB/s\n# Wrong elements       : 0 (OK)\n");
  b.wrong = 2;
  CHECK(etrun::smoke::Summary({a, b}, 2) ==
        "# Avg bus bandwidth    : 2.000 GB/s\n# Wrong elements       : 2 (FAILED)\n");
}

TEST_CASE("inputs sum exactly to the expected values") {
  for (int size : {1, 2, 7, 1000}) {
    for (size_t i : {size_t{0}, size_t{250}, size_t{251}, size_t{1} << 24}) {
      double sum = 0;
      for (int rank = 0; rank < size; ++rank) sum += etrun::smoke::InputValue(rank, i);
      CAPTURE(size);
      CAPTURE(i);
      CHECK(static_cast<float>(sum) == etrun::smoke::ExpectedSum(size, i));
    }
  }
}
