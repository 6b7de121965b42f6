/*
 * The life of an env's state: creation (every part made is released again
 * if a later one fails) and teardown.
 *
 * Teardown is an async cleanup hook: async.c settles the env's records and
 * closes its loop handles; then the env's owner id is marked dead (robust
 * locks: whoever waits on a word naming it takes over), its references are
 * released, and the state is freed once the last handle has closed.
 *
 * Every napi call's status is checked. Where no JS caller can be told (the
 * teardown hook runs with no JS on the stack), a failure is counted in
 * sab_napi_failures, which tests read (failures()) and expect to stay 0.
 */
#include "lifecycle.h"

#include "async.h"
#include "locks.h"
#include "lockwaits.h"
#include "park.h"
#include "values.h"

#include <stdlib.h>

/* The last handle closed (or creation gave up): free everything. */
static void handle_closed(uv_handle_t *h) {
  sab_env_t *e = h->data;
  if (--e->open_handles > 0) return;
  if (e->hook != NULL) sab_napi_note_failure(napi_remove_async_cleanup_hook(e->hook));
  uv_cond_destroy(&e->cv);
  uv_mutex_destroy(&e->mu);
  free(e);
}

/* Release the env's references (at teardown, or when creation fails). */
static void release_refs(sab_env_t *e) {
  if (e->noop != NULL) sab_napi_note_failure(napi_delete_reference(e->env, e->noop));
  if (e->resource != NULL) sab_napi_note_failure(napi_delete_reference(e->env, e->resource));
  if (e->out_ref != NULL) sab_napi_note_failure(napi_delete_reference(e->env, e->out_ref));
  e->out_ref = NULL;
  e->out = NULL;
  if (e->actx != NULL) sab_napi_note_failure(napi_async_destroy(e->env, e->actx));
  e->noop = e->resource = NULL;
  e->actx = NULL;
}

static void env_teardown(napi_async_cleanup_hook_handle handle, void *arg) {
  sab_env_t *e = arg;
  e->hook = handle;
  /* Before the records' teardown frees what keeps their memory. */
  sab_napi_lockwaits_leave(e);
  sab_napi_async_teardown(e, handle_closed);
  /* Its records settled: the named locks it holds go to the next. */
  sab_napi_locks_leave(e);
  /* This thread holds nothing from now on: wake whoever waits on a word
   * that names it, so that they take over (robust locks). */
  sab_owner_died(e->id);
  release_refs(e);
  sab_napi_park_env_gone();
}

/* Creation failed at a napi call: throw (once), release what was made. */
static sab_env_t *give_up(sab_env_t *e, const char *call) {
  sab_napi_throw_last(e->env, call);
  release_refs(e);
  free(e);
  return NULL;
}

#define MAKE(call)                                   \
  do {                                               \
    if ((call) != napi_ok) return give_up(e, #call); \
  } while (0)

sab_env_t *sab_napi_env_create(napi_env env) {
  napi_value fn, src, resource, name;
  sab_env_t *e = calloc(1, sizeof *e);
  if (e == NULL) {
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    return NULL;
  }
  e->env = env;
  e->id = sab_owner_new();
  if (e->id == 0) {
    /* 2^30 threads in this process's life: ids are never reused. */
    sab_napi_throw(env, SAB_ERR_NAPI, "sabsync: no owner ids left in this process");
    free(e);
    return NULL;
  }
  MAKE(napi_get_uv_event_loop(env, &e->loop));
  /* The termination probe calls this after every wake (env.c): a plain JS
   * function, not one made with napi_create_function, whose every call runs
   * a C++ callback through napi's wrapper (measured: 290-350 ns a probe
   * against 55-90 ns). */
  MAKE(napi_create_string_utf8(env, "(function sabsyncProbe() {})", NAPI_AUTO_LENGTH, &src));
  MAKE(napi_run_script(env, src, &fn));
  MAKE(napi_create_reference(env, fn, 1, &e->noop));
  MAKE(napi_create_object(env, &resource));
  MAKE(napi_create_reference(env, resource, 1, &e->resource));
  MAKE(napi_create_string_utf8(env, "sabsync:waitAsync", NAPI_AUTO_LENGTH, &name));
  MAKE(napi_async_init(env, resource, name, &e->actx));
  if (uv_mutex_init(&e->mu) != 0) {
    sab_napi_throw(env, SAB_ERR_UV, "sabsync: could not create a mutex");
    release_refs(e);
    free(e);
    return NULL;
  }
  if (uv_cond_init(&e->cv) != 0) {
    uv_mutex_destroy(&e->mu);
    sab_napi_throw(env, SAB_ERR_UV, "sabsync: could not create a condition variable");
    release_refs(e);
    free(e);
    return NULL;
  }
  if (sab_napi_async_open(e) != 0) {
    sab_napi_throw(env, SAB_ERR_UV, "sabsync: could not set up libuv handles");
    release_refs(e);
    uv_cond_destroy(&e->cv);
    uv_mutex_destroy(&e->mu);
    free(e);
    return NULL;
  }
  if (napi_set_instance_data(env, e, NULL, NULL) != napi_ok ||
      napi_add_async_cleanup_hook(env, env_teardown, e, NULL) != napi_ok) {
    sab_napi_throw_last(env, "napi_add_async_cleanup_hook");
    sab_napi_note_failure(napi_set_instance_data(env, NULL, NULL, NULL));
    /* The handles are open: close them, and the last one frees e. */
    release_refs(e);
    sab_napi_async_teardown(e, handle_closed);
    return NULL;
  }
  sab_napi_park_env_added();
  return e;
}
