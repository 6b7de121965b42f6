/*
 * The space's system calls (space_sys.c), the lowest layer (space_layout.h).
 */
#ifndef SAB_SPACE_SYS_H
#define SAB_SPACE_SYS_H

#include "space_layout.h"

/* fstat, fcntl (the futexes of shared words are futex.c's, flag shared). */
struct stat;
int sab__fstat(int fd, struct stat *st);
struct flock;
int sab__fcntl_lock(int fd, int cmd, struct flock *fl);
/* A pidfd of `pid` (close-on-exec), or -1 (gone, or no pidfds here). */
int sab__pidfd_open(int pid);
/* Add pidfd `fd` to epoll set `epfd` (EPOLL_CTL_ADD), close a pidfd. */
struct epoll_event;
int sab__pidfd_watch(int epfd, int fd, struct epoll_event *ev);
void sab__pidfd_close(int fd);

#endif /* SAB_SPACE_SYS_H */
