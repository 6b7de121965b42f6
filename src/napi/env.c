/*
 * Per-env state: finding it, and the termination probe. Creation and
 * teardown are lifecycle.c's.
 */
#include "env.h"
#include "values.h"

sab_env_t *sab_napi_env_get(napi_env env) {
  void *data = NULL;
  if (napi_get_instance_data(env, &data) != napi_ok || data == NULL) {
    sab_napi_throw(env, SAB_ERR_NAPI, "sabsync: no per-thread state");
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

/* napi_strict_equals runs no JS, but Node checks before it, as before
 * every call that may run JS, that the env can still call into JS, which
 * it cannot once it is stopping (terminate(), exit); it then answers
 * napi_pending_exception. That check costs a fraction of a call into JS,
 * whose entry touches much that a thread just woken on a busy CPU has lost
 * from its caches (measured on the one-CPU round trip: about 0.6 us of
 * process CPU time each). A failure is confirmed by the call itself. */
int sab_napi_env_stopping(sab_env_t *e) {
  napi_value v;
  bool same;
  if (napi_get_undefined(e->env, &v) == napi_ok &&
      napi_strict_equals(e->env, v, v, &same) == napi_ok)
    return 0;
  return sab_napi_env_terminating(e);
}
