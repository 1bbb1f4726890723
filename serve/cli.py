"""`t2rag serve`: start the Ray Serve app locally, in the foreground, until interrupted."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("serve", help="serve the retrievers and generator over HTTP (Ray Serve)")
    p.add_argument("--config", default=None, help="YAML run config (data, retrieval, generator)")
    p.add_argument("--data", default=None, help="hub id, local directory or s3:// prefix (default: bundled sample)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--generator", default=None, help="generator preset (default: the config's, else smollm2-135m)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from serve.app import run_foreground

    return run_foreground(
        config_path=args.config, data=args.data, host=args.host, port=args.port, generator=args.generator
    )
