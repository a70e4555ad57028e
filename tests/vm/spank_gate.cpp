// A SPANK plugin for one VM test (VmSlurm.AJobsFirstStepHasItsJobsLeaseBefore…):
// a barrier in slurmstepd after tally_spank.so (listed before it) started its
// prefetch at slurm_spank_init_post_opt and before the step's I/O setup and
// its tasks. Here that call opens the FIFO named by the plugin's argument for
// reading, which blocks until the test opens it for writing.
//
// Why not later (slurm_spank_user_init, just before the fork): from 23.02 on
// slurmstepd holds Slurm's auth lock for writing while it runs with the
// user's ids (auth_setuid_lock() in drop_privileges(),
// src/slurmd/common/privileges.c; user_init runs inside that window), and
// every slurmctld call's credential takes it for reading (auth_g_create). A
// barrier there holds the prefetch's call too, and the test would see the
// barrier, not the plugin (spank_prefetch.h says what became of the call).
extern "C" {
#include <fcntl.h>
#include <slurm/spank.h>
#include <unistd.h>

__attribute__((visibility("default"))) extern const char plugin_name[] = "tally_test_gate";
__attribute__((visibility("default"))) extern const char plugin_type[] = "spank";
__attribute__((visibility("default"))) extern const unsigned int plugin_version =
    SLURM_VERSION_NUMBER;

__attribute__((visibility("default"))) int slurm_spank_init_post_opt(spank_t sp, int ac,
                                                                     char** av) {
  if (ac < 1 || spank_remote(sp) != 1) return 0;  // slurmstepd only, not srun
  int fd = open(av[0], O_RDONLY);                 // returns once the test opens the FIFO to write
  if (fd >= 0) close(fd);
  return 0;
}
}
