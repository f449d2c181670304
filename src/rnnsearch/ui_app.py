"""The MLflow UI server with one addition: its bare address opens on the project's runs.

MLflow 3.17 shows an experiment in its GenAI mode (an empty "Overview: Traces 0" page) unless
the address carries ``workflowType=machine_learning``, and its home page is reached first. This
ASGI app serves MLflow's own app unchanged and answers ``GET /`` (without a query) with a
redirect to the runs table of the project's experiment, whose path ``rnnsearch.tracking ui``
passes in ``RNNSEARCH_UI_LANDING``. The target carries a query (``/?runs#/experiments/...``):
a browser does not send the ``#...`` part, so a bare ``/#/...`` would come back as ``/`` and
redirect forever. It is registered as the ``mlflow.app`` entry point
``rnnsearch-ui`` (pyproject.toml), so ``mlflow server --app-name rnnsearch-ui`` runs it.
"""
from __future__ import annotations

import os
from typing import Any, Awaitable, Callable

LANDING_ENV = "RNNSEARCH_UI_LANDING"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class LandingRedirect:
    """ASGI middleware: ``GET /`` -> 302 to ``landing``; every other request to ``app``."""

    def __init__(self, app: Callable[..., Awaitable[None]], landing: str) -> None:
        self.app, self.landing = app, landing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["path"] == "/" and not scope.get("query_string")
                and scope["method"] in ("GET", "HEAD") and self.landing):
            await send({"type": "http.response.start", "status": 302,
                        "headers": [(b"location", self.landing.encode()),
                                    (b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


def create_app() -> LandingRedirect:
    """The entry point's factory: MLflow's FastAPI app (configured by ``mlflow server`` through
    its environment) behind :class:`LandingRedirect`."""
    from mlflow.server.fastapi_app import app

    return LandingRedirect(app, os.environ.get(LANDING_ENV, ""))
