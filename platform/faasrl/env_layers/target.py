"""The Python a layer is installed for: the interpreter that runs the backend's functions.

Wheels fit one interpreter (version, ABI, platform: a ``manylinux_2_36`` wheel needs glibc
2.36). Where the functions' interpreter is on the gateway's host and has pip (process backend,
local Ray cluster), pip runs with it and picks what fits it, markers included. Where it is
elsewhere (the Docker backend's image: Debian's Python 3.11.2 next to a host's 3.11.7, perhaps
another glibc), the gateway's pip installs for it with ``--python-version``, ``--implementation``,
``--abi`` and ``--platform`` from a probe of that interpreter (``PROBE``, run in the image);
pip then still evaluates environment markers against its own interpreter, which differs at
most in the patch version.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

# Run by the functions' interpreter (in an image too): what pip needs to install for it.
_DESCRIBE = """\
def describe():
    import platform
    try:
        from packaging import tags
    except ImportError:
        from pip._vendor.packaging import tags
    try:
        import pip  # noqa: F401
        has_pip = True
    except ImportError:
        has_pip = False
    first = next(iter(tags.sys_tags()))
    return {"version": platform.python_version(), "implementation": first.interpreter[:2],
            "abi": first.abi, "pip": has_pip,
            "platforms": list(dict.fromkeys(t.platform for t in tags.sys_tags()))}
"""
PROBE = _DESCRIBE + "import json\nprint(json.dumps(describe()))\n"


class TargetError(RuntimeError):
    """The functions' interpreter could not be asked what it is."""


@dataclass(frozen=True)
class PythonTarget:
    version: str  # "3.11.2"
    implementation: str  # "cp"
    abi: str  # "cp311"
    platforms: tuple[str, ...]  # manylinux_2_36_x86_64, ..., linux_x86_64
    python: str | None = None  # that interpreter, here and with pip: pip runs with it

    @classmethod
    def from_probe(cls, output: str, python: str | None = None) -> PythonTarget:
        """The target that ``PROBE``'s output describes; ``python``: the interpreter it ran,
        when it is on this host."""
        try:
            found: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
            return cls(found["version"], found["implementation"], found["abi"],
                       tuple(found["platforms"]), python if found["pip"] else None)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise TargetError(f"unexpected answer of the interpreter probe: {output[-300:]!r} "
                              f"({exc})") from None

    @property
    def key(self) -> str:
        """The folder of the layers installed for this target (named by its newest manylinux
        tag: the C library its wheels may need)."""
        platform = next((p for p in self.platforms if p.startswith("manylinux_")),
                        self.platforms[0])
        return f"{self.implementation}{self.version}-{self.abi}-{platform}"

    def pip(self) -> list[str]:
        """``pip install`` for this target, with what follows its subcommand."""
        if self.python is not None:
            return [self.python, "-m", "pip", "install"]
        abis = dict.fromkeys([self.abi, "abi3", "none"])
        return [sys.executable, "-m", "pip", "install", "--python-version", self.version,
                "--implementation", self.implementation,
                *(arg for abi in abis for arg in ("--abi", abi)),
                *(arg for platform in self.platforms for arg in ("--platform", platform))]


@functools.cache
def interpreter_target(python: str) -> PythonTarget:
    """The target of an interpreter on this host (asked once per interpreter; this one is
    asked in this process)."""
    if python == sys.executable:
        namespace: dict[str, Any] = {}
        exec(_DESCRIBE, namespace)
        return PythonTarget.from_probe(json.dumps(namespace["describe"]()), python)
    try:
        done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True,
                              timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise TargetError(f"cannot ask {python} what it is: {exc}") from None
    return PythonTarget.from_probe(done.stdout, python)
