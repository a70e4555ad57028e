// A SPANK plugin for one VM test (VmSlurm.AJobsFirstStepHasItsJobsLeaseBefore…):
// a barrier between a step's setup and its first task. slurmstepd calls
// slurm_spank_user_init after the step's setup (its I/O, its cgroup) and
// just before it forks the tasks; here that call opens the FIFO named by the
// plugin's argument for reading, which blocks until the test opens it for
// writing. So the test sees what tally_spank.so (listed before it) did
// beside the setup, before any task of the step exists.
extern "C" {
#include <fcntl.h>
#include <slurm/spank.h>
#include <unistd.h>

__attribute__((visibility("default"))) extern const char plugin_name[] = "tally_test_gate";
__attribute__((visibility("default"))) extern const char plugin_type[] = "spank";
__attribute__((visibility("default"))) extern const unsigned int plugin_version =
    SLURM_VERSION_NUMBER;

__attribute__((visibility("default"))) int slurm_spank_user_init(spank_t, int ac, char** av) {
  if (ac < 1) return 0;
  int fd = open(av[0], O_RDONLY);  // returns once the test opens the FIFO to write
  if (fd >= 0) close(fd);
  return 0;
}
}
