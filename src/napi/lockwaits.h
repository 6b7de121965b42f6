/*
 * Lock waits on this process's memory (lockwaits.c): what the env's
 * teardown needs.
 */
#ifndef SAB_NAPI_LOCKWAITS_H
#define SAB_NAPI_LOCKWAITS_H

#include "env.h"

/* The env is going (lifecycle.c, before its references are released):
 * its waits leave the list, whatever its JS did not get to end. */
void sab_napi_lockwaits_leave(sab_env_t *e);

#endif /* SAB_NAPI_LOCKWAITS_H */
