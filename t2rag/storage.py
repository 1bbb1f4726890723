"""Paths that may be local or on S3: one pyarrow filesystem view of both, and JSON Lines read and written.

S3 settings come from the standard AWS environment (credentials, region, and `AWS_ENDPOINT_URL` for S3-compatible
endpoints such as MinIO or a test server); nothing here logs them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.fs as pafs

from t2rag.errors import InputError


def is_s3(uri: str | os.PathLike[str]) -> bool:
    """True for `s3://` URIs."""
    return str(uri).startswith("s3://")


@contextmanager
def local_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock on a local file (made when missing) while the block runs: other processes of this
    machine asking for the same file wait. It is released when the block ends or its process dies."""
    with open(path, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


def filesystem_for(uri: str | os.PathLike[str]) -> tuple[pafs.FileSystem, str]:
    """Return a pyarrow filesystem and the path inside it for a local path or an `s3://` URI."""
    uri = str(uri)
    if is_s3(uri):
        fs = s3_filesystem()
        return fs, uri.removeprefix("s3://").rstrip("/")
    return pafs.LocalFileSystem(), str(Path(uri).expanduser().resolve())


def s3_filesystem() -> pafs.S3FileSystem:
    """An S3 filesystem configured from the environment, honouring `AWS_ENDPOINT_URL`."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    kwargs: dict[str, object] = {}
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        kwargs["endpoint_override"] = host or scheme
        kwargs["scheme"] = scheme if host else "https"
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        kwargs["region"] = region
    return pafs.S3FileSystem(**kwargs)


def lancedb_storage_options(uri: str) -> dict[str, str] | None:
    """Storage options for `lancedb.connect` on S3-compatible endpoints; None for plain AWS or local paths."""
    if not is_s3(uri):
        return None
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        return None
    options = {
        "endpoint": endpoint,
        "aws_virtual_hosted_style_request": "false",
        "region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
    }
    if endpoint.startswith("http://"):
        options["allow_http"] = "true"
    return options


def join(base: str, *parts: str) -> str:
    """Join path parts for local paths and URIs alike."""
    base = str(base).rstrip("/")
    return "/".join([base, *(p.strip("/") for p in parts)])


def write_bytes(path: str, data: bytes) -> str:
    """Write a file to a local path or an s3:// URI, creating parent folders, atomically: a reader (or a killed
    writer) never leaves a half-written file. Locally the bytes go to a temporary name that is then renamed into
    place; an S3 object appears only when its upload completes."""
    fs, inner = filesystem_for(path)
    fs.create_dir(inner.rsplit("/", 1)[0], recursive=True)
    if is_s3(path):
        with fs.open_output_stream(inner) as stream:
            stream.write(data)
        return path
    tmp = f"{inner}.{os.getpid()}{TEMPORARY_SUFFIX}"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, inner)
    return path


#: The end of the temporary name a local write goes to before its rename (`write_bytes`): `NAME.PID.tmp`.
TEMPORARY_SUFFIX = ".tmp"


def remove_torn_writes(folder: str, min_age_s: float = 10.0) -> int:
    """Remove the temporary files that writers on this machine left when they died mid-write (`write_bytes`): those
    whose process is gone and that nobody has touched for `min_age_s`. Returns how many; nothing on S3, where a torn
    upload leaves no object."""
    if is_s3(folder) or not os.path.isdir(folder):
        return 0
    removed = 0
    for entry in os.scandir(folder):
        name = entry.name
        if not name.endswith(TEMPORARY_SUFFIX):
            continue
        pid = name[: -len(TEMPORARY_SUFFIX)].rsplit(".", 1)[-1]
        if not pid.isdigit() or _alive(int(pid)) or time.time() - entry.stat().st_mtime < min_age_s:
            continue
        with contextlib.suppress(FileNotFoundError):
            os.remove(entry.path)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_bytes(path: str) -> bytes | None:
    """Read a local or s3:// file; None when it does not exist."""
    fs, inner = filesystem_for(path)
    try:
        with fs.open_input_stream(inner) as stream:
            return stream.read()
    except (FileNotFoundError, OSError):
        return None


#: JSON Lines: one JSON object per non-empty line (predictions files, leaderboard submissions).
def read_objects(data: bytes, origin: str) -> list[dict]:
    """The objects of a JSON Lines file; `origin` names it in errors (`origin:line: reason`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{origin}: not UTF-8 text (byte {exc.start})") from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{origin}:{n}: not valid JSON ({exc.msg})") from exc
        if not isinstance(row, dict):
            raise InputError(f"{origin}:{n}: each line must be a JSON object")
        rows.append(row)
    return rows


def dump_objects(rows: Iterable[dict]) -> bytes:
    """One compact JSON object per line, UTF-8."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
