// The Prometheus text exposition: names, label escapes and values.
#include "metrics/exposition.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "support/fake_host.h"

namespace tally {
namespace {

using json = nlohmann::json;
using namespace tally::testing;

TEST(Exposition, NamesEscapesAndValues) {
  EXPECT_TRUE(metrics::validMetricName("tally_lease_memory_bytes"));
  EXPECT_TRUE(metrics::validMetricName("a:b"));
  EXPECT_FALSE(metrics::validMetricName("9x"));
  EXPECT_FALSE(metrics::validMetricName("a-b"));
  EXPECT_FALSE(metrics::validLabelName("a:b"));
  EXPECT_FALSE(metrics::validLabelName("__reserved"));
  // The format's escapes, after the text is made printable (util/clean_text.h):
  // a newline is shown, not obeyed; bytes that are not UTF-8 never reach Prometheus.
  EXPECT_EQ(metrics::escapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\\\u{000A}d");
  EXPECT_EQ(metrics::escapeLabelValue("/user.slice/\xff\x1b]0;x\x07"),
            "/user.slice/\\\\xff\\\\u{001B}]0;x\\\\u{0007}");
  std::vector<metrics::Family> f = {
      {"x_bytes",
       "help with \\ and\nnewline",
       metrics::Type::Gauge,
       {{{{"l", "v\"q"}}, std::uint64_t{18446744073709551615ULL}}}},
      {"y_total", "count", metrics::Type::Counter, {{{}, std::uint64_t{0}}}},
      {"z_seconds", "time", metrics::Type::Gauge, {{{}, 1.5}}},
      {"empty_bytes", "declared, no sample", metrics::Type::Gauge, {}}};
  EXPECT_EQ(metrics::render(f),
            "# HELP x_bytes help with \\\\ and\\nnewline\n# TYPE x_bytes "
            "gauge\nx_bytes{l=\"v\\\"q\"} 18446744073709551615\n"
            "# HELP y_total count\n# TYPE y_total counter\ny_total 0\n"
            "# HELP z_seconds time\n# TYPE z_seconds gauge\nz_seconds 1.5\n"
            "# HELP empty_bytes declared, no sample\n# TYPE empty_bytes gauge\n");
}

}  // namespace
}  // namespace tally
