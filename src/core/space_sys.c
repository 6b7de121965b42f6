/*
 * The system calls of a shared space, apart so that every space file can
 * use them: fstat, fcntl (OFD locks), pidfds. (Its futexes are futex.c's,
 * with the shared flag.)
 */
#define _GNU_SOURCE
#include "space_sys.h"
#include "glibc_old.h"

#if defined(__linux__)

#include <errno.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- files ---- */

/* fstat through the system call: glibc 2.33 versioned fstat anew, and the
 * prebuilt binaries load on 2.17 (glibc_old.h). The kernel's struct stat is
 * glibc's on x86-64 and aarch64. */
int sab__fstat(int fd, struct stat *st) { return (int)syscall(SYS_fstat, fd, st); }

/* fcntl through the system call: glibc 2.28 redirects fcntl to a new
 * fcntl64 symbol where off_t is 64 bits (node-gyp builds so), and the
 * prebuilt binaries load on 2.17. The kernel's struct flock is the one
 * glibc passes on x86-64 and aarch64. */
int sab__fcntl_lock(int fd, int cmd, struct flock *fl) {
  return (int)syscall(SYS_fcntl, fd, cmd, fl);
}

/* ---- processes ---- */

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same on every architecture (Linux 5.3) */
#endif

int sab__pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

/* A pidfd is added to an epoll set and closed by raw syscalls too, as it
 * was made: a sanitizer that intercepts libc's epoll_ctl and close but not
 * pidfd_open would take the new fd for whatever last had its number (a
 * pipe another thread closed) and report a race that the kernel ordered
 * (ThreadSanitizer did, over the tap suite). */
int sab__pidfd_watch(int epfd, int fd, struct epoll_event *ev) {
  return (int)syscall(SYS_epoll_ctl, epfd, EPOLL_CTL_ADD, fd, ev);
}

void sab__pidfd_close(int fd) { (void)syscall(SYS_close, fd); }

#endif /* __linux__ */
