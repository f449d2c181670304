"""The MLflow UI server, opening in the model-training view, its bare address on our runs.

MLflow 3.17's UI reads its GenAI / Model training switch from ``workflowType`` in the address, else
localStorage (:data:`WORKFLOW_KEY`), else GenAI. This ASGI app serves MLflow's app but answers
``GET /`` with its ``index.html`` led by a script that stores Model training as the browser's
choice and sends a bare address (no ``#...``, which no server sees: hence no redirect) to
``RNNSEARCH_UI_LANDING``. ``mlflow server --app-name rnnsearch-ui`` runs it."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Awaitable, Callable

LANDING_ENV = "RNNSEARCH_UI_LANDING"
# MLflow 3.17 keeps the GenAI / Model training choice with useLocalStorage({key:
# "mlflow.workflowType", version: 1}), which stores JSON under "<key>_v<version>".
WORKFLOW_KEY = "mlflow.workflowType_v1"
MODEL_TRAINING = "machine_learning"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def landing_script(landing: str) -> str:
    """The script put first in MLflow's page: store Model training as the browser's choice, and
    go to ``landing`` (a path from the UI's root) when the address has no ``#...`` part."""
    choose = (f"try{{localStorage.setItem({json.dumps(WORKFLOW_KEY)},"
              f"{json.dumps(json.dumps(MODEL_TRAINING))})}}catch(e){{}}")
    land = f"if(!location.hash)location.replace({json.dumps(landing)});" if landing else ""
    return f"<script>{choose}{land}</script>"


def landing_page(index_html: str, landing: str) -> bytes:
    """MLflow's ``index.html`` with :func:`landing_script` first in its ``<head>`` (at the very
    start when it has none), so it runs before MLflow's deferred app script."""
    head = index_html.find("<head>")
    at = head + len("<head>") if head >= 0 else 0
    return (index_html[:at] + landing_script(landing) + index_html[at:]).encode("utf-8")


LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def request_host(scope: Scope) -> str | None:
    """The host a request names in its ``Host`` header (no port, no brackets), or None."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"host":
            host = value.decode("latin-1").strip()
            return host[1:host.find("]")] if host.startswith("[") else host.split(":")[0]
    return None


class LandingPage:
    """ASGI middleware: ``GET`` or ``HEAD /`` for this machine's own address -> ``page`` (when
    there is one); every other request, a page asked for under another host name included
    (a DNS-rebinding page), to ``app``, whose host check answers it as it answers the API."""

    def __init__(self, app: Callable[..., Awaitable[None]], page: bytes | None) -> None:
        self.app, self.page = app, page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (self.page is not None and scope["type"] == "http" and scope["path"] == "/"
                and scope["method"] in ("GET", "HEAD")
                and request_host(scope) in LOCAL_HOSTS | {None}):
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/html; charset=utf-8"),
                                    (b"content-length", str(len(self.page)).encode()),
                                    (b"cache-control", b"no-cache")]})
            body = b"" if scope["method"] == "HEAD" else self.page
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def read_index(static_folder: str | None) -> str | None:
    """MLflow's ``index.html`` from its static folder, or None when it is missing (a source
    install without the built UI: MLflow's own app then says so)."""
    path = Path(static_folder or "") / "index.html"
    return path.read_text(encoding="utf-8") if static_folder and path.is_file() else None


def create_app() -> LandingPage:
    """The entry point's factory: MLflow's FastAPI app (configured by ``mlflow server`` through
    its environment) behind :class:`LandingPage`."""
    from mlflow.server import app as flask_app
    from mlflow.server.fastapi_app import app

    index = read_index(flask_app.static_folder)
    page = None if index is None else landing_page(index, os.environ.get(LANDING_ENV, ""))
    return LandingPage(app, page)
