/*
 * A 32-bit process making the test driver's CREATE (VmKernelCharge's
 * compat test): its ioctls go through compat_sys_ioctl, which calls the
 * LSM's file_ioctl_compat hook instead of file_ioctl. Freestanding (int
 * 0x80 system calls, no libc) so it builds with any x86-64 gcc and runs
 * where the kernel has IA-32 emulation.
 *
 *   compat_create MIB...   one CREATE of each size on /dev/dri/renderD128;
 *                          prints each result (0 or -errno) on a line
 * Exit 0, or 2 when the device cannot be opened.
 */
#include "tally_testdrm_uapi.h"

static long sys3(long n, long a, long b, long c) {
  long r;
  __asm__ volatile("int $0x80" : "=a"(r) : "a"(n), "b"(a), "c"(b), "d"(c) : "memory");
  return r;
}

enum { kExit = 1, kWrite = 4, kOpen = 5, kIoctl = 54, kORdwr = 2 };

static unsigned long long decimal(const char* s) {
  unsigned long long v = 0;
  for (; *s >= '0' && *s <= '9'; ++s) v = v * 10 + (unsigned long long)(*s - '0');
  return v;
}

static void say(long v) {
  char buf[24];
  int i = (int)sizeof buf;
  buf[--i] = '\n';
  unsigned long u = v < 0 ? (unsigned long)-v : (unsigned long)v;
  do buf[--i] = (char)('0' + u % 10); while ((u /= 10) != 0);
  if (v < 0) buf[--i] = '-';
  sys3(kWrite, 1, (long)(buf + i), (long)sizeof buf - i);
}

__attribute__((used)) static void start(long* sp) {
  int argc = (int)sp[0];
  char** argv = (char**)(sp + 1);
  long fd = sys3(kOpen, (long)"/dev/dri/renderD128", kORdwr, 0);
  if (fd < 0) sys3(kExit, 2, 0, 0);
  for (int i = 1; i < argc; ++i) {
    struct tally_testdrm_create c = {decimal(argv[i]) << 20, TALLY_TESTDRM_REGION_GTT, 0};
    say(sys3(kIoctl, fd, (long)DRM_IOCTL_TALLY_TESTDRM_CREATE, (long)&c));
  }
  sys3(kExit, 0, 0, 0);
}

__asm__(".globl _start\n_start:\n  mov %esp, %eax\n  push %eax\n  call start\n  hlt\n");
