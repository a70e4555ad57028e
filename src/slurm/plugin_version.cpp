#include "slurm/plugin_version.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace tally::slurm {
namespace {

// Little-endian reads that refuse to run past the image.
struct Image {
  std::string_view bytes;
  bool fits(std::uint64_t off, std::uint64_t len) const {
    return off <= bytes.size() && len <= bytes.size() - off;
  }
  std::uint64_t u(std::uint64_t off, unsigned len) const {
    std::uint64_t v = 0;
    for (unsigned i = len; i-- > 0;)
      v = (v << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(off + i)]);
    return v;
  }
};

constexpr std::uint32_t kShtDynsym = 11;
constexpr std::uint64_t kSymSize = 24, kShdrSize = 64;

Error bad(std::string_view what) {
  return Error{ENOEXEC, fmt::format("not a plugin tally can read: {}", what)};
}

}  // namespace

Result<std::uint32_t> elfExportedU32(std::string_view elf, std::string_view name) {
  Image im{elf};
  if (!im.fits(0, 64) || std::memcmp(elf.data(),
                                     "\x7f"
                                     "ELF",
                                     4) != 0)
    return bad("no ELF header");
  if (elf[4] != 2 || elf[5] != 1) return bad("not a 64-bit little-endian ELF");
  std::uint64_t shoff = im.u(0x28, 8), shentsize = im.u(0x3a, 2), shnum = im.u(0x3c, 2);
  if (shentsize != kShdrSize || !im.fits(shoff, shnum * kShdrSize))
    return bad("its section headers lie outside the file");
  auto section = [&](std::uint64_t i) { return shoff + i * kShdrSize; };
  for (std::uint64_t s = 0; s < shnum; ++s) {
    std::uint64_t h = section(s);
    if (im.u(h + 4, 4) != kShtDynsym) continue;
    std::uint64_t symOff = im.u(h + 0x18, 8), symSize = im.u(h + 0x20, 8);
    std::uint64_t strIndex = im.u(h + 0x28, 4), entsize = im.u(h + 0x38, 8);
    if (entsize != kSymSize || !im.fits(symOff, symSize) || strIndex >= shnum)
      return bad("its .dynsym is malformed");
    std::uint64_t strOff = im.u(section(strIndex) + 0x18, 8);
    std::uint64_t strSize = im.u(section(strIndex) + 0x20, 8);
    if (!im.fits(strOff, strSize)) return bad("its .dynstr lies outside the file");
    std::string_view strings =
        elf.substr(static_cast<std::size_t>(strOff), static_cast<std::size_t>(strSize));
    for (std::uint64_t e = 0; e < symSize / kSymSize; ++e) {
      std::uint64_t sym = symOff + e * kSymSize;
      std::uint64_t nameAt = im.u(sym, 4);
      if (nameAt >= strings.size()) continue;
      std::string_view symName = strings.substr(static_cast<std::size_t>(nameAt));
      symName = symName.substr(0, symName.find('\0'));
      if (symName != name) continue;
      std::uint64_t shndx = im.u(sym + 6, 2), value = im.u(sym + 8, 8), size = im.u(sym + 16, 8);
      if (size != 4) return bad(fmt::format("{} is {} bytes, not 4", name, size));
      if (shndx == 0 || shndx >= shnum) return bad(fmt::format("{} is not defined here", name));
      std::uint64_t holder = section(shndx);
      std::uint64_t addr = im.u(holder + 0x10, 8), off = im.u(holder + 0x18, 8);
      std::uint64_t len = im.u(holder + 0x20, 8);
      // The section within the file, the symbol within the section: each
      // bound checked before the sum is formed.
      if (!im.fits(off, len) || value < addr || value - addr > len || len - (value - addr) < 4)
        return bad(fmt::format("{} lies outside its section", name));
      return static_cast<std::uint32_t>(im.u(off + (value - addr), 4));
    }
    return Error{ENOENT, fmt::format("it exports no {}: not a SPANK plugin", name)};
  }
  return bad("it has no dynamic symbol table");
}

}  // namespace tally::slurm
