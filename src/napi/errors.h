/*
 * The binding's errors: every ERR_SABSYNC_* code the addon throws, in one
 * table (errors.c), exported to JS as `errorCodes` and checked against the
 * registry of lib/errors.js by test/layers.test.js. No other file of the
 * binding spells a code.
 */
#ifndef SAB_NAPI_ERRORS_H
#define SAB_NAPI_ERRORS_H

#include "check.h"

typedef enum {
  SAB_ERR_NAPI,            /* a Node-API call failed */
  SAB_ERR_NOMEM,           /* out of memory */
  SAB_ERR_UV,              /* libuv handles could not be set up */
  SAB_ERR_BAD_MEMORY,      /* the memory holds no valid object of that kind */
  SAB_ERR_SHARED_NAME,     /* openShared: a name refused */
  SAB_ERR_SHARED_KEY,      /* a space key refused */
  SAB_ERR_SHARED_MISMATCH, /* a key or size of another kind */
  SAB_ERR_SHARED_FULL,     /* no room in the space */
  SAB_ERR_SHARED_VERSION,  /* not a space of this layout version */
  SAB_ERR_SHARED_FOREIGN,  /* a file at the name that is not ours */
  SAB_ERR_SHARED_CLOSED,   /* a closed space's handle */
  SAB_ERR_SHARED_BUSY,     /* a bookkeeping lock held too long by a live holder */
  SAB_ERR_SHARED_SYSTEM,   /* a system call failed */
  SAB_ERR_UNSUPPORTED,     /* no shared spaces on this platform */
  SAB_ERR_LOCKS_FULL,      /* the named locks' table is full */
  SAB_ERR_COUNT_
} sab_napi_err_t;

/* Throw an Error whose code is `err`'s, with `msg`. Does nothing when an
 * exception is already pending (that one is what JS sees). */
void sab_napi_throw(napi_env env, sab_napi_err_t err, const char *msg);
/* The same error, made (for a promise to reject with), not thrown. */
napi_status sab_napi_error(napi_env env, sab_napi_err_t err, const char *msg, napi_value *out);

/* Throw the error of a core code (SAB_E_*, include/sabsync.h and
 * sabsync_space.h): "<what>: <what the code means>"; a code with no entry
 * is a system error, described by errno. */
void sab_napi_throw_core(napi_env env, int r, const char *what);

/* exports.errorCodes: the table's codes, by sab_napi_err_t. */
int sab_napi_set_error_codes(napi_env env, napi_value exports);

#endif /* SAB_NAPI_ERRORS_H */
