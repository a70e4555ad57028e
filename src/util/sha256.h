// SHA-256 (FIPS 180-4) for the ledger's hash chain. Small and dependency-free:
// the chain needs a collision-resistant digest of short rows, nothing more.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tally::sha256 {

using Digest = std::array<std::uint8_t, 32>;

Digest digest(std::string_view data);
std::string hex(std::string_view data);  // lowercase, 64 characters

}  // namespace tally::sha256
