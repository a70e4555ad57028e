// A SPANK plugin's plugin_version read from its file without loading it:
// a minimal ELF64 image built here (null, .dynsym, .dynstr, .rodata, as the
// linker lays them out), and every header lie refused without reading past
// the image.
#include "slurm/plugin_version.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace tally::slurm {
namespace {

void put(std::string& b, std::size_t off, std::uint64_t v, unsigned len) {
  if (b.size() < off + len) b.resize(off + len, '\0');
  for (unsigned i = 0; i < len; ++i) b[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

struct Elf {
  std::uint64_t rodataAddr = 0x2000, symValue = 0x2008, symSize = 4;
  std::uint32_t version = 0x160508;
  std::string symName = "plugin_version";
  std::uint16_t symShndx = 3;

  std::string build() const {
    std::string b(64, '\0');
    std::memcpy(b.data(),
                "\x7f"
                "ELF",
                4);
    b[4] = 2;  // ELFCLASS64
    b[5] = 1;  // little-endian
    // .dynstr at 0x100, .dynsym at 0x200 (null symbol + ours), .rodata at 0x300.
    std::string strings = std::string("\0", 1) + "slurm_spank_init" + '\0' + symName + '\0';
    b.resize(0x100, '\0');
    b += strings;
    b.resize(0x200, '\0');
    put(b, 0x200 + 24, 1 + 17, 4);  // st_name: after "\0slurm_spank_init\0"
    put(b, 0x200 + 24 + 6, symShndx, 2);
    put(b, 0x200 + 24 + 8, symValue, 8);
    put(b, 0x200 + 24 + 16, symSize, 8);
    b.resize(0x300, '\0');
    put(b, 0x300 + 8, version, 4);  // .rodata + 8 = symValue - rodataAddr
    b.resize(0x320, '\0');
    // Section headers at 0x400: [0] null, [1] .dynsym, [2] .dynstr, [3] .rodata.
    std::size_t sh = 0x400;
    auto header = [&](int i, std::uint32_t type, std::uint64_t addr, std::uint64_t off,
                      std::uint64_t size, std::uint32_t link, std::uint64_t entsize) {
      std::size_t h = sh + static_cast<std::size_t>(i) * 64;
      put(b, h + 4, type, 4);
      put(b, h + 0x10, addr, 8);
      put(b, h + 0x18, off, 8);
      put(b, h + 0x20, size, 8);
      put(b, h + 0x28, link, 4);
      put(b, h + 0x38, entsize, 8);
    };
    header(0, 0, 0, 0, 0, 0, 0);
    header(1, 11, 0, 0x200, 48, 2, 24);
    header(2, 3, 0, 0x100, strings.size(), 0, 0);
    header(3, 1, rodataAddr, 0x300, 0x20, 0, 0);
    put(b, 0x28, sh, 8);  // e_shoff
    put(b, 0x3a, 64, 2);  // e_shentsize
    put(b, 0x3c, 4, 2);   // e_shnum
    return b;
  }
};

TEST(PluginVersion, ReadsTheExportedVersionWithoutLoadingThePlugin) {
  auto v = elfExportedU32(Elf{}.build(), "plugin_version");
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(*v, 0x160508u);
  Elf newer;
  newer.version = 0x180b05;
  EXPECT_EQ(*elfExportedU32(newer.build(), "plugin_version"), 0x180b05u);
  auto missing = elfExportedU32(Elf{}.build(), "plugin_type");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("exports no plugin_type"), std::string::npos);
}

TEST(PluginVersion, HeadersThatLieAreRefusedNeverReadPast) {
  EXPECT_FALSE(elfExportedU32("", "plugin_version"));
  EXPECT_FALSE(elfExportedU32("#!/bin/sh\necho hi\n", "plugin_version"));
  std::string good = Elf{}.build();
  EXPECT_FALSE(elfExportedU32(good.substr(0, 0x400), "plugin_version")) << "headers cut off";
  std::string b32 = good;
  b32[4] = 1;  // ELFCLASS32
  EXPECT_FALSE(elfExportedU32(b32, "plugin_version"));
  Elf outside;
  outside.symValue = 0x2000 + 0x1e;  // 2 bytes left in .rodata
  EXPECT_FALSE(elfExportedU32(outside.build(), "plugin_version"));
  Elf below;
  below.symValue = 0x1000;
  EXPECT_FALSE(elfExportedU32(below.build(), "plugin_version"));
  Elf wide;
  wide.symSize = 8;
  EXPECT_FALSE(elfExportedU32(wide.build(), "plugin_version"));
  Elf undefinedHere;
  undefinedHere.symShndx = 0;
  EXPECT_FALSE(elfExportedU32(undefinedHere.build(), "plugin_version"));
  Elf pastSections;
  pastSections.symShndx = 9;
  EXPECT_FALSE(elfExportedU32(pastSections.build(), "plugin_version"));
  std::string hugeOffset = good;
  put(hugeOffset, 0x400 + 3 * 64 + 0x18, ~0ULL - 2, 8);  // .rodata's offset near 2^64
  EXPECT_FALSE(elfExportedU32(hugeOffset, "plugin_version"));
}

}  // namespace
}  // namespace tally::slurm
