// The fixture of the service's hostile tests (HostileServiceTest): the
// service's fixture with a run lease started in its own scope, and one
// request repeated with its answers counted. Shared by the
// hostile_service*_test.cpp files.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/service_fixture.h"

namespace tally::testing {

class HostileServiceTest : public ServiceTest {
 protected:
  // A run lease of `uid`, started in its own scope; returns its id.
  std::string runningLease(std::uint64_t conn, std::uint32_t uid, const std::string& pool = "gpu") {
    json a = call(conn, uid, "acquire", {{"pools", {pool}}, {"gpu_memory_max", GiB}});
    EXPECT_TRUE(a["ok"]) << a;
    std::string id = a["result"]["lease"];
    std::string slice = "/tally.slice/tally-" + id + ".slice";
    workloadCgroup(slice, true, uid);
    workloadCgroup(slice + "/tally-" + id + ".scope", true, uid);
    json s = call(
        conn, uid, "started",
        {{"lease", id}, {"cgroup", slice + "/tally-" + id + ".scope"}, {"counters_cgroup", slice}});
    EXPECT_TRUE(s["ok"]) << s;
    return id;
  }
  // `n` calls of one request: how many were answered, how many refused, and
  // the last refusal.
  struct Repeated {
    int answered = 0, refused = 0;
    json last;
  };
  Repeated repeat(int n, std::uint64_t conn, std::uint32_t uid, const std::string& method,
                  const json& params) {
    Repeated out;
    for (int i = 0; i < n; ++i) {
      json r = call(conn, uid, method, params);
      if (r["ok"]) {
        ++out.answered;
      } else {
        ++out.refused;
        out.last = r;
      }
    }
    return out;
  }
};

}  // namespace tally::testing
