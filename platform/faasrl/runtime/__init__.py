"""What runs inside every function container: a small HTTP server that keeps a handler warm.

Protocol (the same on every backend): ``GET /healthz``; ``POST /init {handler, env}`` once;
``POST /run {args, deadline_s, invocation_id, threads?}`` -> ``{result, duration_s, cpu_s,
wait_s}`` or ``{error: {type, message}, duration_s, cpu_s, wait_s}`` (``threads``: the cores
this run has, where the invoker lent it more than its container's: the numeric libraries'
thread pools are sized to them; ``cpu_s``: the process's CPU time during the run; ``wait_s``:
the handler thread's wait for a core, null where unmeasured).
Handlers are called as ``handler(args, context)``.
"""
