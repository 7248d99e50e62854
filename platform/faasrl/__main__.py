"""``python -m faasrl`` is the ``faasrl`` command."""

from faasrl.cli import main

main()
