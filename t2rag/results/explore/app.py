"""The explorer's HTTP routes (FastAPI, served by uvicorn on loopback): the page, its JSON and its plots."""

from __future__ import annotations

import logging
import time
from importlib.resources import files

from t2rag.results.explore.index import RunIndex, load_run

log = logging.getLogger(__name__)
PAGE_LIMIT = 200


def build_app(index: RunIndex):
    """The FastAPI application over one indexed run."""
    from fastapi import FastAPI, HTTPException, Query
    from fastapi.responses import HTMLResponse, Response

    app = FastAPI(title="t2rag explore", docs_url=None, redoc_url=None)
    page = files("t2rag.results.explore").joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/", response_class=HTMLResponse)
    def home() -> str:
        return page

    @app.get("/api/overview")
    def overview() -> dict:
        return {"run": index.run_dir, **index.overview, "plots": sorted(index.plots)}

    @app.get("/api/plot/{name}.png")
    def plot(name: str) -> Response:
        if name not in index.plots:
            raise HTTPException(404, f"no plot '{name}'")
        return Response(index.plots[name], media_type="image/png")

    @app.get("/api/questions")
    def questions(
        method: str | None = None,
        subset: str | None = None,
        outcome: str | None = None,
        q: str | None = None,
        offset: int = Query(0, ge=0),
        limit: int = Query(50, ge=1, le=PAGE_LIMIT),
    ) -> dict:
        return index.question_list(method, subset, outcome, q, offset, limit)

    @app.get("/api/question/{subset}/{qid}")
    def question(subset: str, qid: str) -> dict:
        try:
            return index.question_detail(subset, qid)
        except KeyError as exc:
            raise HTTPException(404, str(exc.args[0])) from None

    @app.get("/api/context/{context_id}")
    def context(context_id: str) -> dict:
        text = index.context_text(context_id)
        if text is None:
            raise HTTPException(404, f"context '{context_id}' is not in the run's data")
        return {"context_id": context_id, "text": text}

    return app


def make_server(index: RunIndex, host: str, port: int):
    """A uvicorn server of the explorer over an indexed run (not started)."""
    import uvicorn

    return uvicorn.Server(uvicorn.Config(build_app(index), host=host, port=port, log_level="warning"))


def serve_run(run_dir: str, host: str, port: int, data: str | None = None, on_ready=None) -> None:
    """Index the run, then serve the explorer until interrupted; `on_ready(url)` is called once it listens."""
    started = time.monotonic()
    index = load_run(run_dir, data)
    log.info("indexed %d records of %s in %.1f s", index.records.num_rows, run_dir, time.monotonic() - started)
    server = make_server(index, host, port)
    if on_ready is not None:
        original = server.startup

        async def startup(sockets=None) -> None:
            await original(sockets)
            bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
            on_ready(f"http://{host}:{bound}/")

        server.startup = startup  # type: ignore[method-assign]
    server.run()
