"""The user's documentation holds together: every relative link in README.md and docs/*.md
points at a file or folder of the repository, and the README stays a short guide."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO

README_MAX_LINES = 260
# [text](target) and ![alt](target); the target ends at the first space or closing bracket
# (an optional "title" after a space is not part of it).
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+[^)]*)?\)")
EXTERNAL = ("http://", "https://", "mailto:")


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def without_code(text: str) -> str:
    """``text`` with fenced code blocks and inline code removed (a link there is an example)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def relative_links(path: Path) -> list[str]:
    """The relative link targets of ``path``, each without its ``#anchor``."""
    targets = LINK.findall(without_code(path.read_text(encoding="utf-8")))
    return [t.split("#", 1)[0] for t in targets
            if not t.startswith(EXTERNAL) and t.split("#", 1)[0]]


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path):
    missing = [t for t in relative_links(path) if not (path.parent / t).exists()]
    assert not missing, f"{path.relative_to(REPO)}: links to missing files: {missing}"


def test_the_documents_have_links_to_check():
    assert relative_links(REPO / "README.md"), "no relative link found in README.md"


def test_readme_is_a_short_guide():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"


def test_link_pattern_reads_both_kinds_and_drops_anchors(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('[a](docs/x.md#part) ![b](img.png "title") [c](https://example.org) '
                    "`[d](in/code.md)` [e](#local)\n```\n[f](in/fence.md)\n```\n",
                    encoding="utf-8")
    assert relative_links(page) == ["docs/x.md", "img.png"]
