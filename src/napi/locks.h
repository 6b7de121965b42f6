/*
 * The threads tier's named locks (locks.c): what the env's teardown needs.
 */
#ifndef SAB_NAPI_LOCKS_H
#define SAB_NAPI_LOCKS_H

#include "env.h"

/* The env is going (lifecycle.c, after its records settled): every lock
 * it holds is released, and its agent freed. */
void sab_napi_locks_leave(sab_env_t *e);

#endif /* SAB_NAPI_LOCKS_H */
