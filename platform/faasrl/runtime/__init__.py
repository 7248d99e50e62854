"""What runs inside every function container: a small HTTP server that keeps a handler warm.

Protocol (the same on every backend): ``GET /healthz``; ``POST /init {handler, env}`` once;
``POST /run {args, deadline_s, invocation_id}`` -> ``{result, duration_s}`` or
``{error: {type, message}, duration_s}``. Handlers are called as ``handler(args, context)``.
"""
