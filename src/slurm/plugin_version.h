// The Slurm release a SPANK plugin was built for, read from the file the way
// SPANK reads it (the exported `plugin_version`, SLURM_VERSION_NUMBER), but
// without loading it: a plugin links with -z now, and its Slurm symbols
// exist only inside srun and slurmstepd, so dlopen() outside them fails.
// Pure over the file's bytes: ELF64, little-endian (x86-64, arm64); fuzzed
// (fuzz_plugin_version).
#pragma once

#include <cstdint>
#include <string_view>

#include "util/result.h"

namespace tally::slurm {

// The 32-bit value of the exported symbol `name` in the ELF64 image `elf`
// (its .dynsym entry, read from the section that holds it). An error names
// what is missing or malformed; a lie in the headers is never read past the
// image.
Result<std::uint32_t> elfExportedU32(std::string_view elf, std::string_view name);

}  // namespace tally::slurm
