/*
 * Making an env's state and tearing it down (lifecycle.c).
 */
#ifndef SAB_NAPI_LIFECYCLE_H
#define SAB_NAPI_LIFECYCLE_H

#include "env.h"

/* Create the env's state and register its teardown. NULL: an exception is
 * pending, and nothing that was made is left behind. */
sab_env_t *sab_napi_env_create(napi_env env);

#endif /* SAB_NAPI_LIFECYCLE_H */
