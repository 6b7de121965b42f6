/*
 * Helpers shared by the binding's files: the checking macro for napi
 * calls, and argument fetching.
 */
#ifndef SAB_NAPI_CHECK_H
#define SAB_NAPI_CHECK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* uv.h needs the POSIX types that -std=c11 hides */
#endif

#define NAPI_VERSION 8
#include <node_api.h>

/* Throw an Error describing the last napi failure, unless an exception is
 * already pending (then that one is what JS sees). */
void sab_napi_throw_last(napi_env env, const char *call);

/* A napi call's status where no JS caller can be told of a failure (env
 * teardown, loop callbacks): a failure is counted in sab_napi_failures,
 * which JS reads as failures() and the tests expect to stay 0. */
extern uint32_t sab_napi_failures;
void sab_napi_note_failure(napi_status status);

/* Evaluate a napi call; on failure throw (once) and return `ret`. */
#define SAB_CALL(env, call, ret)         \
  do {                                   \
    if ((call) != napi_ok) {             \
      sab_napi_throw_last((env), #call); \
      return ret;                        \
    }                                    \
  } while (0)

/* Fetch exactly `n` arguments (missing ones read as undefined). */
#define SAB_ARGS(env, info, n, ret)   \
  size_t argc = (n);                  \
  napi_value argv[(n) > 0 ? (n) : 1]; \
  SAB_CALL((env), napi_get_cb_info((env), (info), &argc, argv, NULL, NULL), ret)

#endif /* SAB_NAPI_CHECK_H */
