/*
 * What every binding file needs to turn values and results between JS and
 * the core: throwing, numbers, Int32Array memory, tagged externals, and the
 * names of results.
 */
#ifndef SAB_NAPI_VALUES_H
#define SAB_NAPI_VALUES_H

#include "check.h"
#include "errors.h"
#include "sabsync.h"

#include <stddef.h>
#include <stdint.h>

/* A JS number, or NULL with an exception pending. */
napi_value sab_napi_number(napi_env env, double v);

/* A number argument that JS has checked (lib/): 0, or -1 with an
 * exception pending. */
int sab_napi_get_u32(napi_env env, napi_value v, uint32_t *out);
int sab_napi_get_double(napi_env env, napi_value v, double *out);

/* The bytes of the Int32Array `ta` (TypeError naming `name` otherwise);
 * its ArrayBuffer in *buffer when wanted. 0, or -1 with an exception. */
int sab_napi_int32_memory(napi_env env, napi_value ta, const char *name, void **data, size_t *bytes,
                          napi_value *buffer);

/* The expected value of a cell of `size` bytes: a Number (as int32) for
 * 4, a BigInt for 8 (JS has converted it as Atomics.wait does). 0, or -1
 * with an exception pending. */
int sab_napi_cell_value(napi_env env, napi_value v, int size, int64_t *out);

/* Milliseconds (normalised by JS: >= 0, or +Infinity) to a deadline on
 * sab_now()'s clock, rounded up so that it is never early. */
uint64_t sab_napi_deadline(double ms);

/*
 * Type tags of the externals this binding hands to JS: each is tagged when
 * it is made and checked before its pointer is used (sab_napi_unwrap), so
 * that an external of another kind, or another addon's, is a TypeError and
 * never a pointer taken for what it is not.
 */
extern const napi_type_tag sab_napi_tag_sema_view;    /* a Sema's checked view */
extern const napi_type_tag sab_napi_tag_limiter_view; /* a RateLimiter's parameters */
/* Tag a fresh external: 0, or -1 with an exception pending. */
int sab_napi_tag(napi_env env, napi_value external, const napi_type_tag *tag);
/* The pointer of `v` if it is an external tagged `tag`; else NULL with a
 * TypeError pending that says `what` was expected. */
void *sab_napi_unwrap(napi_env env, napi_value v, const napi_type_tag *tag, const char *what);

/* The public name of a result that a promise or a wait answers ("ok",
 * "not-equal", "timed-out"); the one table, exported to JS as resultNames.
 * NULL for results that never reach JS. */
const char *sab_napi_result_name(int result);

/* A table of functions to export, and adding it to `exports` (0, or -1
 * with an exception pending). */
typedef struct {
  const char *name;
  napi_callback cb;
} sab_napi_fn_t;
int sab_napi_add_functions(napi_env env, napi_value exports, const sab_napi_fn_t *fns, size_t n);

#endif /* SAB_NAPI_VALUES_H */
