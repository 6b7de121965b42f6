/*
 * Results of more than one value: a call answers a result code (of the
 * one constants export, binding.c) and writes the rest into exports.out,
 * a Float64Array of SAB_NAPI_OUT doubles per thread that JS reads right
 * after the call. Each call's comment names the slots it writes.
 */
#ifndef SAB_NAPI_RESULTS_H
#define SAB_NAPI_RESULTS_H

#include "env.h"

#define SAB_NAPI_OUT 8

/* What a token semaphore's promise resolves to without a token (a promise
 * settles after the call returned, so it cannot use out), and what
 * spaceSemaSettle answers for the second. Exported as SEMA_TIMED_OUT and
 * SEMA_NO_TOKEN. */
#define SAB_NAPI_SEMA_TIMED_OUT (-1)
#define SAB_NAPI_SEMA_NO_TOKEN  (-2) /* woken by a stray notify: acquire again */

/* exports.out, made once per env. 0, or -1 with an exception pending. */
int sab_napi_out_create(napi_env env, sab_env_t *e, napi_value exports);

/* This env's out slots; NULL with an exception pending. */
double *sab_napi_out(napi_env env);

/* A Sema's try or acquire: OK with the token in out[0] when `got`, else
 * TIMED_OUT. */
napi_value sab_napi_token_result(napi_env env, int got, uint32_t token);

/* A Sema's release that answered `r` (a slot, or a negative code) and
 * info `bits`: OK with the bits in out[0] and the slot in out[1], or
 * BAD_TOKEN. */
napi_value sab_napi_release_result(napi_env env, int r, uint32_t bits);

/* A RateLimit's take: OK with the grant's time (`at`, ns) in out[0] in
 * ms, or TIMED_OUT with the time to wait (`wait`, ns) in out[0] in ms. */
napi_value sab_napi_rate_result(napi_env env, int granted, uint64_t at, uint64_t wait);

/* `code`, with `value` in out[0]. */
napi_value sab_napi_result1(napi_env env, int code, double value);

#endif /* SAB_NAPI_RESULTS_H */
