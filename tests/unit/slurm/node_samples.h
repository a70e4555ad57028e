// What Debian 12's Slurm 22.05 printed in the VM harness (vm/slurm-node.sh:
// a node with tallymem 1G): the texts the node readers and the health check
// are tested on.
#pragma once

namespace tally::slurm::samples {

inline constexpr const char* kSlurmdV = "slurm-wlm 22.05.8\n";
inline constexpr const char* kSlurmdG =
    "slurmd-vm: Gres Name=tallymem Type=(null) Count=1073741824 ID=3654405869 (null)\n";

}  // namespace tally::slurm::samples
