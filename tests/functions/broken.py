"""A handler module that fails at import: containers of it must fail to start, clearly."""

raise RuntimeError("this module is broken on purpose")
