"""A disk cache of generations keyed by (engine, model, messages, sampling parameters).

SQLite in WAL mode: one file, safe for several processes on one machine, and a rerun of the same prompts costs
nothing. Failed generations are never cached, so a rerun retries them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from t2rag.generation.base import ChatRequest, Generation, Generator


def default_cache_path() -> Path:
    return Path(os.environ.get("T2RAG_CACHE", "~/.cache/t2rag")).expanduser() / "generations.sqlite"


class GenerationCache:
    """Key-value store of Generation results."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.commit()

    def get_many(self, keys: Sequence[str]) -> dict[str, Generation]:
        found: dict[str, Generation] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT key, value FROM generations WHERE key IN ({marks})", chunk)
                for key, value in rows:
                    data = json.loads(value)
                    # Nothing is computed for a hit: every prompt token counts as reused.
                    found[key] = Generation(
                        **{**data, "seconds": 0.0, "cached": True, "cached_prompt_tokens": data["prompt_tokens"]}
                    )
        return found

    def put_many(self, items: dict[str, Generation]) -> None:
        rows = [
            (
                key,
                json.dumps(
                    {"text": g.text, "prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens}
                ),
            )
            for key, g in items.items()
            if g.error is None
        ]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO generations (key, value) VALUES (?, ?)", rows)
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM generations").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CachedGenerator(Generator):
    """Serves repeated requests from the cache and sends only the misses to the wrapped engine."""

    def __init__(self, inner: Generator, cache: GenerationCache | None = None):
        self.inner = inner
        self.cache = cache or GenerationCache()
        self.engine = inner.engine

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def concurrent_batches(self) -> bool:  # type: ignore[override]
        return self.inner.concurrent_batches

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        keys = [r.key(self.inner.engine, self.inner.model_id) for r in requests]
        hits = self.cache.get_many(keys)
        todo = [i for i, key in enumerate(keys) if key not in hits]
        fresh = self.inner.generate([requests[i] for i in todo]) if todo else []
        self.cache.put_many({keys[i]: g for i, g in zip(todo, fresh, strict=True)})
        by_index = dict(zip(todo, fresh, strict=True))
        return [hits[keys[i]] if keys[i] in hits else by_index[i] for i in range(len(requests))]

    def load(self) -> None:
        self.inner.load()

    def close(self) -> None:
        self.inner.close()
        self.cache.close()
