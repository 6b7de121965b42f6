/*
 * Per-env state: finding it, and the termination probe. Creation and
 * teardown are lifecycle.c's.
 */
#include "env.h"
#include "values.h"

sab_env_t *sab_napi_env_get(napi_env env) {
  void *data = NULL;
  if (napi_get_instance_data(env, &data) != napi_ok || data == NULL) {
    sab_napi_throw_code(env, "ERR_SABSYNC_NAPI", "sabsync: no per-thread state");
    return NULL;
  }
  return data;
}

/* A call of the env's probe, a plain JS function that does nothing, fails
 * once termination was asked for: Node refuses calls into JS from an env
 * that is stopping (napi_pending_exception), and V8 throws its termination
 * at the entry of a JS function. Cheap enough to make after every wake. */
int sab_napi_env_terminating(sab_env_t *e) {
  napi_value fn, recv, result;
  if (napi_get_reference_value(e->env, e->noop, &fn) != napi_ok || fn == NULL) return 1;
  if (napi_get_undefined(e->env, &recv) != napi_ok) return 1;
  return napi_call_function(e->env, recv, fn, 0, NULL, &result) != napi_ok;
}
