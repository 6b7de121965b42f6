/*
 * The binding's one error table (errors.h): the code of each error, and the
 * core codes with what they mean.
 */
#include "errors.h"
#include "sabsync.h"
#include "sabsync_space.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* By sab_napi_err_t; each is in lib/errors.js CODES (test/layers.test.js). */
static const char *const codes[SAB_ERR_COUNT_] = {
    [SAB_ERR_NAPI] = "ERR_SABSYNC_NAPI",
    [SAB_ERR_NOMEM] = "ERR_SABSYNC_NOMEM",
    [SAB_ERR_UV] = "ERR_SABSYNC_UV",
    [SAB_ERR_BAD_MEMORY] = "ERR_SABSYNC_BAD_MEMORY",
    [SAB_ERR_SHARED_NAME] = "ERR_SABSYNC_SHARED_NAME",
    [SAB_ERR_SHARED_KEY] = "ERR_SABSYNC_SHARED_KEY",
    [SAB_ERR_SHARED_MISMATCH] = "ERR_SABSYNC_SHARED_MISMATCH",
    [SAB_ERR_SHARED_FULL] = "ERR_SABSYNC_SHARED_FULL",
    [SAB_ERR_SHARED_VERSION] = "ERR_SABSYNC_SHARED_VERSION",
    [SAB_ERR_SHARED_FOREIGN] = "ERR_SABSYNC_SHARED_FOREIGN",
    [SAB_ERR_SHARED_CLOSED] = "ERR_SABSYNC_SHARED_CLOSED",
    [SAB_ERR_SHARED_BUSY] = "ERR_SABSYNC_SHARED_BUSY",
    [SAB_ERR_SHARED_SYSTEM] = "ERR_SABSYNC_SHARED_SYSTEM",
    [SAB_ERR_UNSUPPORTED] = "ERR_SABSYNC_UNSUPPORTED",
    [SAB_ERR_LOCKS_FULL] = "ERR_SABSYNC_LOCKS_FULL",
};

/* The core codes that reach JS as errors: which error, and what it says
 * after the caller's `what`. */
static const struct {
  int r;
  sab_napi_err_t err;
  const char *says;
} core[] = {
    {SAB_E_CORRUPT, SAB_ERR_BAD_MEMORY, "the space's bookkeeping does not hold a valid state"},
    {SAB_E_INVAL, SAB_ERR_BAD_MEMORY, "the space's bookkeeping does not hold a valid state"},
    {SAB_E_SPACE_NAME, SAB_ERR_SHARED_NAME, "not a valid space name"},
    {SAB_E_SPACE_SIZE, SAB_ERR_SHARED_MISMATCH, "the space exists with another size"},
    {SAB_E_SPACE_FOREIGN, SAB_ERR_SHARED_FOREIGN,
     "the file at that name is not one this process may trust (owned by another user, a mode "
     "wider than asked, or not a regular file): it was not made by this user's sabsync; remove "
     "it, or choose another name"},
    {SAB_E_SPACE_VERSION, SAB_ERR_SHARED_VERSION, NULL /* see below */},
    {SAB_E_SPACE_MISMATCH, SAB_ERR_SHARED_MISMATCH,
     "the key names an object of another kind or parameters"},
    {SAB_E_SPACE_FULL, SAB_ERR_SHARED_FULL, "the space is full"},
    {SAB_E_UNSUPPORTED, SAB_ERR_UNSUPPORTED, "shared spaces between processes need Linux"},
    {SAB_E_SPACE_KEY, SAB_ERR_SHARED_KEY, "not a valid key"},
    {SAB_E_SPACE_BUSY, SAB_ERR_SHARED_BUSY,
     "a bookkeeping lock of the space was held past this call's bound by a process that "
     "lives (stopped, in a debugger, or a co-tenant writing the space); try again"},
};

napi_status sab_napi_error(napi_env env, sab_napi_err_t err, const char *msg, napi_value *out) {
  napi_value code, text;
  if ((unsigned)err >= SAB_ERR_COUNT_) err = SAB_ERR_NAPI;
  napi_status st = napi_create_string_utf8(env, codes[err], NAPI_AUTO_LENGTH, &code);
  if (st == napi_ok) st = napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &text);
  if (st == napi_ok) st = napi_create_error(env, code, text, out);
  return st;
}

void sab_napi_throw(napi_env env, sab_napi_err_t err, const char *msg) {
  bool pending = false;
  if (napi_is_exception_pending(env, &pending) != napi_ok || pending) return;
  if ((unsigned)err >= SAB_ERR_COUNT_) err = SAB_ERR_NAPI;
  /* Fails only with an exception pending, which JS then sees. */
  (void)napi_throw_error(env, codes[err], msg);
}

void sab_napi_throw_core(napi_env env, int r, const char *what) {
  char msg[512];
  for (size_t i = 0; i < sizeof core / sizeof core[0]; i++) {
    if (core[i].r != r) continue;
    if (r == SAB_E_SPACE_VERSION) {
      snprintf(msg, sizeof msg,
               "%s: not a sabsync space of layout version %d of the size its header records "
               "(made by another version, not by sabsync, resized, or its header was "
               "overwritten); a space in use is never initialised again: unlink it when no "
               "process uses it, or give the new release a new space name",
               what, SAB_SPACE_VERSION);
    } else {
      snprintf(msg, sizeof msg, "%s: %s", what, core[i].says);
    }
    sab_napi_throw(env, core[i].err, msg);
    return;
  }
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(errno));
  sab_napi_throw(env, SAB_ERR_SHARED_SYSTEM, msg);
}

int sab_napi_set_error_codes(napi_env env, napi_value exports) {
  napi_value list, name;
  SAB_CALL(env, napi_create_array_with_length(env, SAB_ERR_COUNT_, &list), -1);
  for (uint32_t i = 0; i < SAB_ERR_COUNT_; i++) {
    SAB_CALL(env, napi_create_string_utf8(env, codes[i], NAPI_AUTO_LENGTH, &name), -1);
    SAB_CALL(env, napi_set_element(env, list, i, name), -1);
  }
  SAB_CALL(env, napi_object_freeze(env, list), -1);
  SAB_CALL(env, napi_set_named_property(env, exports, "errorCodes", list), -1);
  return 0;
}
