/*
 * The binding's parts, each adding its functions to the module's exports
 * (0, or -1 with an exception pending). Only binding.c calls these.
 */
#ifndef SAB_NAPI_REGISTER_H
#define SAB_NAPI_REGISTER_H

#include "values.h"

int sab_napi_wait_register(napi_env env, napi_value exports);      /* wait.c */
int sab_napi_sema_register(napi_env env, napi_value exports);      /* sema.c */
int sab_napi_rate_register(napi_env env, napi_value exports);      /* rate.c */
int sab_napi_limiter_register(napi_env env, napi_value exports);   /* limiter.c */
int sab_napi_space_register(napi_env env, napi_value exports);     /* space.c */
int sab_napi_locks_register(napi_env env, napi_value exports);     /* locks.c */
int sab_napi_inside_register(napi_env env, napi_value exports);    /* inside.c */
int sab_napi_lockwaits_register(napi_env env, napi_value exports); /* lockwaits.c */

#endif /* SAB_NAPI_REGISTER_H */
