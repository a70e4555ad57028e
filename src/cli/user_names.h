// Owners as a person reads them: a uid's login name in a table, and --user's
// name or number as a uid. NSS is asked once per uid per command (a table of
// 500 leases of one user is one look-up), and only by the client: the daemon
// sends uids and never waits on NSS for a listing.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "util/result.h"

namespace tally::cli {

class UserNames {
 public:
  // The login name; a uid without one is its number.
  const std::string& of(std::uint32_t uid);
  // Sets "user" beside each row's "owner_uid" (rows without it: untouched),
  // for the views, which are pure and print what the row says.
  void annotate(nlohmann::json& rows);

 private:
  std::map<std::uint32_t, std::string> cache_;
};

// --user NAME|UID: the uid. The error names the value and what to pass.
Result<std::uint32_t> userArgument(const std::string& text);
// --user as a command reads it: "" leaves `out` unset; a user that does not
// exist is said as "tally COMMAND: ..." and false returned (exit 2).
bool userOption(const char* command, const std::string& text, std::optional<std::uint32_t>& out);

// The uid a row (or an event, or an outcome record's "lease") names as its
// owner; absent when it names none.
std::optional<std::uint32_t> ownerOf(const nlohmann::json& row);

}  // namespace tally::cli
