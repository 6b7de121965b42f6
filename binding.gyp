{
  "variables": {
    # 1 builds the portable (libuv mutex/condvar) parker instead of the
    # Linux futex one: `SABSYNC_PARKER=uv npm run build`.
    "sab_parker_uv%": "0"
  },
  "targets": [
    {
      "target_name": "sabsync",
      "sources": [
        "src/core/clock.c",
        "src/core/lot.c",
        "src/core/owner.c",
        "src/core/owner_threads.c",
        "src/core/sema.c",
        "src/core/rate.c",
        "src/core/limiter.c",
        "src/core/locks.c",
        "src/core/lockwaits.c",
        "src/core/parker_uv.c",
        "src/napi/errors.c",
        "src/napi/values.c",
        "src/napi/results.c",
        "src/napi/env.c",
        "src/napi/lifecycle.c",
        "src/napi/pool.c",
        "src/napi/keep.c",
        "src/napi/heap.c",
        "src/napi/async.c",
        "src/napi/park.c",
        "src/napi/wait.c",
        "src/napi/sema.c",
        "src/napi/rate.c",
        "src/napi/limiter.c",
        "src/napi/locks.c",
        "src/napi/space.c",
        "src/napi/inside.c",
        "src/napi/lockwaits.c",
        "src/napi/binding.c"
      ],
      "include_dirs": ["include", "src/core"],
      "defines": ["NAPI_VERSION=8"],
      "cflags_c": ["-std=c11", "-Wall", "-Wextra", "-O2"],
      "conditions": [
        # The parker: Linux's futex one (parker_futex.c, below), Windows'
        # WaitOnAddress one; every other OS (macOS), or sab_parker_uv=1 on
        # Linux, the portable one. Windows builds only with mingw-w64
        # (scripts/cross.js, which reads this file): the core uses GNU C's
        # atomic builtins and POSIX threads (winpthreads, linked statically).
        ["OS!='win' and (sab_parker_uv==1 or OS!='linux')", { "defines": ["SAB_PARKER_UV"] }],
        ["OS=='win'", {
          "sources": ["src/core/parker_win.c"],
          "defines": ["SAB_PARKER_WIN", "_WIN32_WINNT=0x0A00"],
          "libraries": ["-lsynchronization"]
        }],
        # Shared spaces between processes (openShared) need Linux; elsewhere
        # src/napi/space.c answers ERR_SABSYNC_UNSUPPORTED.
        ["OS=='linux'", {
          "sources": [
            "src/core/parker_futex.c",
            "src/core/futex.c",
            "src/core/space_sys.c",
            "src/core/space_lock.c",
            "src/core/space_watch.c",
            "src/core/lifeline.c",
            "src/core/space_lot.c",
            "src/core/space_sema.c",
            "src/core/space_owners.c",
            "src/core/space.c",
            "src/core/space_inspect.c"
          ],
          "libraries": ["-ldl"]
        }]
      ]
    }
  ]
}
