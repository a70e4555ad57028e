// What Debian 12's Slurm 22.05 (and sid's 26.05) printed in the VM harness
// (vm/slurm-node.sh: a node with tallymem 1G): the texts the node readers and
// the health check are tested on.
#pragma once

namespace tally::slurm::samples {

inline constexpr const char* kSlurmdV = "slurm-wlm 22.05.8\n";
// scontrol show node vm -o, as the VM printed it (RealMemory=512 in
// vm/slurm-node.sh's slurm.conf).
// `scontrol show config | grep ^Prolog` in the VM harness, 22.05 and 26.05
// (no Contain), as printed; and the 22.05 lines with PrologFlags as Slurm
// prints it under PrologFlags=Contain (which implies Alloc): constructed, not
// captured.
inline constexpr const char* kScontrolConfig =
    "Prolog                  = (null)\n"
    "PrologEpilogTimeout     = 65534\n"
    "PrologSlurmctld         = (null)\n"
    "PrologFlags             = (null)\n";
inline constexpr const char* kScontrolConfig2605 =
    "PrologEpilogTimeout     = 65534\n"
    "PrologFlags             = (null)\n";
inline constexpr const char* kScontrolConfigContain =
    "Prolog                  = (null)\n"
    "PrologEpilogTimeout     = 65534\n"
    "PrologSlurmctld         = (null)\n"
    "PrologFlags             = Alloc,Contain\n";
inline constexpr const char* kScontrolNode =
    "NodeName=vm Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.13 Av"
    "ailableFeatures=(null) ActiveFeatures=(null) Gres=tallymem:1G NodeAddr=192.0.2.1 NodeHos"
    "tName=vm Version=22.05.8 OS=Linux 6.12.117+deb12-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1"
    "2.117-1~deb12u1 (2026-11-14)  RealMemory=512 AllocMem=0 FreeMem=1889 Sockets=2 Boards=1 "
    "State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu  B"
    "ootTime=2026-12-02T12:28:55 SlurmdStartTime=2026-12-02T12:29:10 LastBusyTime=2026-12-02T"
    "12:30:07 CfgTRES=cpu=2,mem=512M,billing=2 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatt"
    "s=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s\n";
// The same node under sid's Slurm 26.05 (vm/debian-slurm.sh), as the VM printed it.
inline constexpr const char* kScontrolNode2605 =
    "NodeName=vm Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.36 Av"
    "ailableFeatures=(null) ActiveFeatures=(null) Gres=tallymem:1G NodeAddr=192.0.2.1 NodeHos"
    "tName=vm Version=26.05.5 OS=Linux 6.12.118+deb12-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1"
    "2.118-1~deb12u1 (2026-11-28)  RealMemory=512 AllocMem=0 FreeMem=1822 Sockets=2 Boards=1 "
    "State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu  B"
    "ootTime=2026-12-06T13:54:20 SlurmdStartTime=2026-12-06T14:06:51 LastBusyTime=2026-12-06T"
    "14:06:50 ResumeAfterTime=None SuspendTime=INFINITE CfgTRES=cpu=2,mem=512M,billing=2 Allo"
    "cTRES= CurrentWatts=0 AveWatts=0\n";

}  // namespace tally::slurm::samples
