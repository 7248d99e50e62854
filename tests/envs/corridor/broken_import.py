"""An env module that fails as it is imported."""

raise ImportError("broken_import: this module cannot be imported")
