"""Where the benchmark comes from: the bundled sample, a local directory, an `s3://` prefix or the hub.

All four share the hub's layout, `data/<Subset>/<split>/*.parquet` (ConvFinQA: `data/ConvFinQA/*.parquet`), so
one listing function serves them; the hub is first mirrored to the local cache by `huggingface_hub`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyarrow.fs as pafs

from t2rag.errors import DataError, first_line
from t2rag.storage import filesystem_for, is_s3

HUB_DATASET = "G4KMU/t2-ragbench"
BUNDLED_SAMPLE = Path(__file__).resolve().parent.parent / "sample"
_HUB_ID = re.compile(r"^(?:hf://(?:datasets/)?)?(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?:@(?P<rev>[\w./-]+))?$")


@dataclass(frozen=True)
class DataSource:
    """A resolved data location."""

    kind: Literal["bundled", "local", "s3", "hub"]
    location: str  # directory, s3 URI or hub repo id
    revision: str | None = None

    def describe(self) -> str:
        rev = f"@{self.revision}" if self.revision else ""
        return f"{self.kind}:{self.location}{rev}"


@dataclass(frozen=True)
class SourceFile:
    """One parquet file of the layout, with the subset and split its folders name."""

    subset: str
    split: str | None  # None when the folder does not name it (ConvFinQA): the `split` column decides
    path: str  # path inside `filesystem`
    uri: str  # what to show users


def resolve_source(spec: str | None) -> DataSource:
    """Turn a `--data` argument into a DataSource; None means the bundled sample."""
    if spec is None or spec == "" or spec == "sample":
        return DataSource("bundled", str(BUNDLED_SAMPLE))
    if is_s3(spec):
        return DataSource("s3", spec.rstrip("/"))
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise DataError(f"{spec}: expected a directory in the hub layout (data/<Subset>/<split>/*.parquet)")
        return DataSource("local", str(path.resolve()))
    match = _HUB_ID.match(spec)
    if match and not spec.startswith((".", "/", "~")):
        return DataSource("hub", match["repo"], match["rev"])
    raise DataError(f"{spec}: no such directory, and not an s3:// URI or a hub dataset id")


def materialize(source: DataSource, subsets: list[str] | None = None) -> tuple[pafs.FileSystem, str, str]:
    """Return (filesystem, root path, display root) for a source, downloading hub data to the local cache."""
    if source.kind == "hub":
        root = download_from_hub(source.location, source.revision, subsets)
        fs, path = filesystem_for(root)
        return fs, path, f"hf://datasets/{source.location}"
    fs, path = filesystem_for(source.location)
    return fs, path, source.location


def download_from_hub(repo_id: str, revision: str | None, subsets: list[str] | None) -> str:
    """Mirror the parquet files of the chosen subsets into the Hugging Face cache; returns the local root."""
    from huggingface_hub import snapshot_download

    patterns = [f"data/{s}/**" for s in subsets] if subsets else ["data/**"]
    try:
        return snapshot_download(repo_id=repo_id, repo_type="dataset", revision=revision, allow_patterns=patterns)
    except Exception as exc:  # network, auth, unknown revision: all surface as one clear line
        raise DataError(f"could not download {repo_id}@{revision or 'main'} from the hub: {first_line(exc)}") from exc


def list_source_files(fs: pafs.FileSystem, root: str, display_root: str) -> list[SourceFile]:
    """List the parquet files of the layout under root (which may be the repo root or its `data/` folder)."""
    data_dir = _data_dir(fs, root)
    selector = pafs.FileSelector(data_dir, recursive=True, allow_not_found=True)
    files: list[SourceFile] = []
    for info in fs.get_file_info(selector):
        if info.type != pafs.FileType.File or not info.path.endswith(".parquet"):
            continue
        parts = info.path[len(data_dir) :].strip("/").split("/")
        if len(parts) not in (2, 3):
            continue
        subset = parts[0]
        split = parts[1] if len(parts) == 3 else None
        uri = display_root.rstrip("/") + "/" + info.path[len(root) :].lstrip("/")
        files.append(SourceFile(subset=subset, split=split, path=info.path, uri=uri))
    if not files:
        raise DataError(f"{display_root}: no parquet files found in the layout data/<Subset>/<split>/*.parquet")
    return sorted(files, key=lambda f: (f.subset, f.split or "", f.path))


def _data_dir(fs: pafs.FileSystem, root: str) -> str:
    """The layout's `data/` folder: root/data when there is one (whatever root is called), else root itself."""
    root = root.rstrip("/")
    info = fs.get_file_info(root + "/data")
    if info.type == pafs.FileType.Directory:
        return root + "/data"
    if fs.get_file_info(root).type == pafs.FileType.NotFound:
        raise DataError(f"{root}: not found")
    # Object stores have no directories: probe for the prefix by listing.
    probe = fs.get_file_info(pafs.FileSelector(root + "/data", allow_not_found=True))
    return root + "/data" if probe else root
