"""Function code as a zip archive: how a folder travels from the CLI to any container.

A gateway cannot mount the client's folder into a container: the client may be on another
machine, and a gateway that itself runs in a container sees neither the host's paths nor the
client's. So ``faasrl functions deploy`` packs the folder, uploads it once (``POST /v1/code``,
content-addressed by its sha256, kept in Redis), and the invoker sends it with ``/init``, where
the runtime unpacks it into the container's tmpfs. Packing is deterministic (sorted names, fixed
timestamps), so the same folder always has the same digest and re-deploying it is free.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

SKIP_DIRS = {"__pycache__", ".git", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
NO_ARCHIVE = "no uploaded code archive has this digest (POST /v1/code)"  # an unknown code_sha256
SHA256_PATTERN = r"^[0-9a-f]{64}$"  # how an archive is named (code_sha256): its hex sha256
_EPOCH = (1980, 1, 1, 0, 0, 0)


class ArchiveError(ValueError):
    """Not a zip, or one that would unpack outside its folder or beyond the size limit."""


def pack(folder: str | Path) -> bytes:
    """The folder as a zip (compiled files and tool caches left out)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ArchiveError(f"{folder} is not a folder")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if path.is_dir() or path.suffix == ".pyc" or SKIP_DIRS & set(rel.parts[:-1]):
                continue
            info = zipfile.ZipInfo(rel.as_posix(), _EPOCH)
            info.external_attr = (path.stat().st_mode & 0o777) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    return buf.getvalue()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check(data: bytes) -> int:
    """Validate an uploaded archive; returns its number of files."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            for info in infos:
                parts = Path(info.filename).parts
                if info.filename.startswith(("/", "\\")) or ".." in parts \
                        or ":" in info.filename:
                    raise ArchiveError(f"member {info.filename!r} would unpack outside its folder")
            if sum(i.file_size for i in infos) > MAX_UNPACKED_BYTES:
                raise ArchiveError(f"unpacks to more than {MAX_UNPACKED_BYTES >> 20} MiB")
            bad = zf.testzip()
    except (zipfile.BadZipFile, EOFError) as exc:
        raise ArchiveError(f"not a zip archive: {exc}") from None
    if bad is not None:
        raise ArchiveError(f"corrupt member {bad!r}")
    return len(infos)
