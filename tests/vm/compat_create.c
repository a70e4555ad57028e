/*
 * A 32-bit process making the test driver's CREATE (VmKernelCharge's
 * compat test): its ioctls go through compat_sys_ioctl, which calls the
 * LSM's file_ioctl_compat hook instead of file_ioctl. Freestanding (int
 * 0x80 system calls, no libc) so it builds with any x86-64 gcc and runs
 * where the kernel has IA-32 emulation.
 *
 *   compat_create MIB...   one CREATE of each size on /dev/dri/renderD128;
 *                          prints each result (0 or -errno) on a line. A size
 *                          written cN passes its struct from a page not yet
 *                          mapped (written to a memfd, mapped fresh), which
 *                          the compat hook cannot read without faulting
 * Exit 0, or 2 when the device cannot be opened.
 */
#include "tally_testdrm_uapi.h"

static long sys3(long n, long a, long b, long c) {
  long r;
  __asm__ volatile("int $0x80" : "=a"(r) : "a"(n), "b"(a), "c"(b), "d"(c) : "memory");
  return r;
}

/* The sixth argument goes in ebp, which the compiler may use: saved around
 * the call, loaded from a static (no stack-relative operand survives the push). */
static long arg6;
static long sys6(long n, long a, long b, long c, long d, long e, long f) {
  long r;
  arg6 = f;
  __asm__ volatile("push %%ebp\n  mov %7, %%ebp\n  int $0x80\n  pop %%ebp"
                   : "=a"(r)
                   : "a"(n), "b"(a), "c"(b), "d"(c), "S"(d), "D"(e), "m"(arg6)
                   : "memory");
  return r;
}

enum {
  kExit = 1,
  kWrite = 4,
  kOpen = 5,
  kIoctl = 54,
  kORdwr = 2,
  kMmap2 = 192,
  kMemfdCreate = 356,
  kProtRw = 3,
  kMapShared = 1
};

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
    int cold = argv[i][0] == 'c';
    struct tally_testdrm_create c = {decimal(argv[i] + cold) << 20, TALLY_TESTDRM_REGION_GTT, 0};
    void* arg = &c;
    if (cold) {
      long m = sys3(kMemfdCreate, (long)"cold", 0, 0);
      if (m < 0 || sys3(kWrite, m, (long)&c, (long)sizeof c) != (long)sizeof c) sys3(kExit, 5, 0, 0);
      long p = sys6(kMmap2, 0, 4096, kProtRw, kMapShared, m, 0);
      if (p < 0 && p > -4096) sys3(kExit, 6, 0, 0);
      arg = (void*)p;
    }
    say(sys3(kIoctl, fd, (long)DRM_IOCTL_TALLY_TESTDRM_CREATE, (long)arg));
  }
  sys3(kExit, 0, 0, 0);
}

__asm__(".globl _start\n_start:\n  mov %esp, %eax\n  push %eax\n  call start\n  hlt\n");
