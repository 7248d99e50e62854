"""Build a wheelhouse for an image on the host, resolved for the image's Python.

Containers on our machines cannot reach the package index, so ``pip download`` runs here and the
Dockerfiles install with ``pip install --no-index``. pip evaluates environment markers against
the interpreter that runs it, and ``--python-version`` does not change ``python_full_version``:
a host on 3.11.7 skips ``async-timeout; python_full_version < "3.11.3"`` that redis needs on
Debian's 3.11.2. So after the download, this walks every requirement from the roots down,
evaluating markers for the image's interpreter (``--python``), and downloads what is missing
until nothing is. ``--pyproject`` adds the project's build requirements (setuptools), so the
image can build faasrl's own wheel from source with no index.

    python images/wheelhouse.py --requirements images/runtime/requirements.txt \
        --constraints constraints.txt --pyproject pyproject.toml --python 3.11.2 \
        --dest build/images/runtime/wheelhouse
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version


def pip_download(specs: list[str], dest: Path, constraints: Path, extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
           "--dest", str(dest), "-c", str(constraints), *extra, *specs]
    done = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    # Index entries missing from a local mirror are warned about one by one; the rest matters.
    sys.stderr.writelines(line for line in done.stderr.splitlines(keepends=True)
                          if not line.startswith("WARNING: Location"))
    done.check_returncode()


def wheels(dest: Path) -> dict[str, tuple[Version, Path]]:
    """The wheelhouse by canonical project name (the newest version when there are several)."""
    found: dict[str, tuple[Version, Path]] = {}
    for path in dest.glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(path.name)
        if name not in found or found[name][0] < version:
            found[name] = (version, path)
    return found


def requires(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        headers = HeaderParser().parsestr(zf.read(meta).decode())
    return [Requirement(r) for r in headers.get_all("Requires-Dist") or []]


def missing(roots: list[Requirement], house: dict[str, tuple[Version, Path]],
            env: dict[str, str]) -> list[Requirement]:
    """Requirements the image's interpreter needs that no wheel in the house satisfies."""
    seen: set[tuple[str, str]] = set()
    todo = [(r, "") for r in roots]
    lacking: dict[str, Requirement] = {}
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
            continue
        name = canonicalize_name(req.name)
        have = house.get(name)
        if have is None or (req.specifier and not req.specifier.contains(have[0],
                                                                          prereleases=True)):
            lacking.setdefault(name, req)
            continue
        for wanted in ("", *sorted(req.extras)):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            todo.extend((dep, wanted) for dep in requires(have[1]))
    return list(lacking.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirements", type=Path, required=True)
    parser.add_argument("--constraints", type=Path, required=True)
    parser.add_argument("--pyproject", type=Path,
                        help="also its [build-system] requires (to build the project's wheel)")
    parser.add_argument("--python", required=True, help="the image's Python, e.g. 3.11.2")
    parser.add_argument("--dest", type=Path, required=True)
    parser.add_argument("--pip-arg", action="append", default=[],
                        help="passed to pip download (e.g. --pip-arg=--index-url=...)")
    args = parser.parse_args()

    args.dest.mkdir(parents=True, exist_ok=True)
    lines = [ln.split("#")[0].strip() for ln in args.requirements.read_text().splitlines()]
    roots = [Requirement(ln) for ln in lines if ln]
    if args.pyproject:
        build_system = tomllib.loads(args.pyproject.read_text()).get("build-system", {})
        roots += [Requirement(r) for r in build_system.get("requires", [])]
    pip_download([str(r) for r in roots], args.dest, args.constraints, args.pip_arg)
    major_minor = ".".join(args.python.split(".")[:2])
    env = {**default_environment(), "python_full_version": args.python,
           "python_version": major_minor, "implementation_version": args.python}
    for _ in range(10):
        lacking = missing(roots, wheels(args.dest), env)
        if not lacking:
            break
        print(f"wheelhouse: for Python {args.python} also {', '.join(map(str, lacking))}")
        specs = [str(Requirement(f"{r.name}{r.specifier}")) for r in lacking]
        pip_download(specs, args.dest, args.constraints, args.pip_arg)
    else:
        sys.exit(f"wheelhouse: still missing after 10 rounds: {', '.join(map(str, lacking))}")
    print(f"wheelhouse: {len(wheels(args.dest))} wheels in {args.dest} for Python {args.python}")


if __name__ == "__main__":
    main()
