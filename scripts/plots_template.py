"""Write ``.dvc/plots.html``: DVC's plots page template with Vega, Vega-Lite and Vega-Embed inline.

``dvc plots show`` and ``dvc plots diff`` write ``dvc_plots/index.html``, whose default template
loads those three libraries from a CDN, so the page stays blank without a network. The project's
``.dvc/config`` names this template instead (``plots.html_template``): the page renders offline.

The libraries are the versions DVC's renderer (dvc-render) asks the CDN for, taken from the npm
registry and checked against their sha512 (npm's ``integrity``). A contributor reruns this script
when the pinned dvc-render moves to other versions:

    python scripts/plots_template.py [--from FOLDER_OF_NPM_TARBALLS]
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import io
import sys
import tarfile
import urllib.request
from pathlib import Path

from rnnsearch.command import run_command
from rnnsearch.data.savefile import save_atomically

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / ".dvc" / "plots.html"
REGISTRY = "https://registry.npmjs.org"
# package, version (dvc_render.vega.VegaRenderer.SCRIPTS), npm integrity, built file
LIBRARIES = (
    ("vega", "5.20.2", "sha512-qmH7aD9GGPpssVdxL1xgcdxTbQzyRUeRR16Os385ymvQhiwCYQNA6+eXUPAZDTVLfk0RX"
     "u6Jzj6kUE5jQ80EVw==", "build/vega.min.js"),
    ("vega-lite", "5.2.0", "sha512-Yxcg8MvYfxHcG6BbkaKT0oVCIMIcE19UvqIsEwBmyd/7h2nzW7oRnID81T8UrY7hp"
     "DrIr6wa2JADOT2dhGNErw==", "build/vega-lite.min.js"),
    ("vega-embed", "6.18.2", "sha512-wcDyQPE4J5aiCDc3/suH5RQDvrKkjuLkhzUcbOLwEkNF8/+pp17tS0JghzEvAP"
     "NRg+5aG1/N2ydixq8Lk3dOlg==", "build/vega-embed.min.js"),
)
PAGE = """<!DOCTYPE html>
<html>
<head>
    {refresh_tag}
    <title>DVC Plot</title>
    <!-- Vega, Vega-Lite and Vega-Embed inline, so that the page renders without a network
         (written by scripts/plots_template.py; their licenses are at the end of the page). -->
{libraries}
    <style>
        table {{
            border-spacing: 15px;
        }}
    </style>
</head>
<body>
    {{plot_divs}}
</body>
<!--
{licenses}
-->
</html>
"""


def tarball(name: str, version: str, folder: Path | None) -> bytes:
    """The npm tarball of ``name@version``: from ``folder`` (``npm pack`` output) or the
    registry."""
    file = f"{name}-{version}.tgz"
    if folder is not None:
        return (folder / file).read_bytes()
    with urllib.request.urlopen(f"{REGISTRY}/{name}/-/{file}", timeout=60) as response:
        return response.read()


def checked(data: bytes, integrity: str, name: str) -> bytes:
    """``data`` if its sha512 is npm's ``integrity``; else a SystemExit naming the package."""
    digest = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    if digest != integrity:
        raise SystemExit(f"{name}: sha512 {digest} is not the pinned {integrity}")
    return data


def member(data: bytes, path: str) -> str:
    """The text of ``package/<path>`` in an npm tarball."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        return archive.extractfile(f"package/{path}").read().decode("utf-8")


def page(folder: Path | None) -> str:
    """The template: each library in a script element, their licenses in a closing comment."""
    scripts, licenses = [], []
    for name, version, integrity, built in LIBRARIES:
        data = checked(tarball(name, version, folder), integrity, name)
        code = member(data, built)
        if "</script" in code.lower() or "{plot_divs}" in code:
            raise SystemExit(f"{name}: its code cannot be inlined as it is")
        scripts.append(f"    <script>/* {name}@{version} */\n{code}\n    </script>")
        licenses.append(f"{name}@{version}:\n{member(data, 'LICENSE').replace('--', '- -')}")
    return PAGE.format(refresh_tag="{refresh_tag}", libraries="\n".join(scripts),
                       licenses="\n".join(licenses))


def main() -> None:
    """Build the page and write it in one piece (a failed download leaves the old one)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="folder", type=Path,
                        help="a folder of the npm tarballs (npm pack vega@... ...)")
    args = parser.parse_args()
    text = page(args.folder)
    save_atomically(TEMPLATE, lambda path: path.write_text(text, encoding="utf-8"))
    print(f"wrote {TEMPLATE.relative_to(REPO)}")


if __name__ == "__main__":
    sys.exit(run_command("plots_template", main))
