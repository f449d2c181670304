"""The documentation holds together and its numbers point at committed files.

The committed documents are README.md, docs/*.md and every reports/**/README.md. In each:

- every relative link points at a file or folder of the repository, and a ``#anchor`` into a
  Markdown file at one of its headings (GitHub's heading ids);
- a cited metrics key resolves. The convention (docs/contributing.md, "Numbers in the docs"): a
  number taken from a JSON file (or params.yaml) is quoted next to a link to that file, followed
  by the key path in backquotes, several separated by commas, e.g.
  ``[`metrics/train/search-50.json`](metrics/train/search-50.json) `epochs`, `train_minutes```;
  each key path is resolved in the linked file (dots separate levels, a number indexes a list,
  a key that itself holds a dot, such as ``threshold 0.3``, is matched whole);
- no row of a results table the report stage generated is typed into README.md or docs/*.md:
  those tables are linked, not copied.

The README also stays a short guide.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import REPO

# The README stays a guide: fewer lines and bytes than these (detail goes into docs/).
README_MAX_LINES = 260
README_MAX_BYTES = 20_000
# [text](target) and ![alt](target); the target ends at the first space or closing bracket
# (an optional "title" after a space is not part of it).
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+[^)]*)?\)")
# A link to a JSON (or YAML: params.yaml) file, then the backquoted key paths cited from it.
CITATION = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+\.(?:json|yaml))>?\)((?:\s*,?\s*`[^`\n]+`)+)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
TABLE_ROW = re.compile(r"^\|.*\|[ \t]*$", re.M)
EXTERNAL = ("http://", "https://", "mailto:")


def documents() -> list[Path]:
    """The committed documents a reader meets: README.md, docs/*.md, reports/**/README.md."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
            *sorted((REPO / "reports").rglob("README.md"))]


def hand_written() -> list[Path]:
    """The documents people write (the reports are generated)."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def without_code(text: str) -> str:
    """``text`` with fenced code blocks and inline code removed (a link there is an example)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def link_targets(path: Path) -> list[tuple[str, str]]:
    """The relative links of ``path`` as (file, anchor) pairs; file '' is ``path`` itself."""
    targets = LINK.findall(without_code(path.read_text(encoding="utf-8")))
    pairs = [(t.partition("#")[0], t.partition("#")[2]) for t in targets]
    return [(file, anchor) for file, anchor in pairs
            if not file.startswith(EXTERNAL) and (file or anchor)]


def relative_links(path: Path) -> list[str]:
    """The relative link targets of ``path`` that name a file, each without its ``#anchor``."""
    return [file for file, _ in link_targets(path) if file]


def heading_ids(path: Path) -> set[str]:
    """GitHub's ids of the headings of the Markdown file ``path`` (a repeated one gets -1, -2)."""
    ids: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)       # a link reads as its text
        slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
        unique, n = slug, 0
        while unique in ids:
            n += 1
            unique = f"{slug}-{n}"
        ids.add(unique)
    return ids


def link_problems(path: Path) -> list[str]:
    """Each relative link of ``path`` that points at nothing, or at no heading of a .md file."""
    problems = []
    for file, anchor in link_targets(path):
        target = path.parent / file if file else path
        if not target.exists():
            problems.append(f"missing file: {file}")
        elif anchor and target.suffix == ".md" and anchor not in heading_ids(target):
            problems.append(f"no heading #{anchor} in {file or path.name}")
    return problems


def resolve(data: object, key_path: str) -> object:
    """The value at dotted ``key_path`` in ``data``; KeyError naming the first part not found."""
    parts, node, i = key_path.split("."), data, 0
    while i < len(parts):
        if isinstance(node, dict):
            # the longest run of parts that is a key: keys may hold dots ("threshold 0.3")
            match = next((j for j in range(len(parts), i, -1) if ".".join(parts[i:j]) in node),
                         None)
            if match is None:
                raise KeyError(".".join(parts[: i + 1]))
            node, i = node[".".join(parts[i:match])], match
        elif isinstance(node, list) and parts[i].isdigit() and int(parts[i]) < len(node):
            node, i = node[int(parts[i])], i + 1
        else:
            raise KeyError(".".join(parts[: i + 1]))
    return node


def cited_keys(path: Path) -> list[tuple[str, str]]:
    """The (JSON or YAML file, key path) pairs ``path`` cites (the module docstring's convention)."""
    cited = []
    for file, keys in CITATION.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        cited += [(file, key) for key in re.findall(r"`([^`\n]+)`", keys)]
    return cited


def citation_problems(path: Path) -> list[str]:
    """Each cited key of ``path`` that its linked JSON or YAML file does not have."""
    problems, loaded = [], {}
    for file, key in cited_keys(path):
        target = path.parent / file
        if file not in loaded:
            try:
                text = target.read_text(encoding="utf-8")
                loaded[file] = json.loads(text) if file.endswith(".json") else yaml.safe_load(text)
            except (OSError, ValueError, yaml.YAMLError) as exc:
                loaded[file] = exc
        data = loaded[file]
        if isinstance(data, Exception):
            problems.append(f"{file}: cannot read it for `{key}` ({data})")
            continue
        try:
            resolve(data, key)
        except KeyError as exc:
            problems.append(f"{file}: no key `{key}` (nothing at {exc})")
    return problems


def generated_rows(root: Path) -> set[str]:
    """The data rows (those with a digit) of every Markdown table under ``root``, normalised."""
    rows = set()
    for path in root.rglob("*.md"):
        rows |= {normal_row(r) for r in TABLE_ROW.findall(path.read_text(encoding="utf-8"))
                 if re.search(r"\d", r)}
    return rows


def normal_row(row: str) -> str:
    return "|".join(cell.strip() for cell in row.strip().strip("|").split("|"))


def copied_rows(path: Path, generated: set[str]) -> list[str]:
    """The table rows of ``path`` that repeat a row of a generated table."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return [row for row in TABLE_ROW.findall(text) if normal_row(row) in generated]


def doc_id(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.mark.parametrize("path", documents(), ids=doc_id)
def test_every_relative_link_resolves(path):
    problems = link_problems(path)
    assert not problems, f"{doc_id(path)}: {problems}"


@pytest.mark.parametrize("path", documents(), ids=doc_id)
def test_every_cited_metrics_key_exists(path):
    problems = citation_problems(path)
    assert not problems, f"{doc_id(path)}: {problems}"


@pytest.mark.parametrize("path", hand_written(), ids=doc_id)
def test_no_generated_table_is_copied(path):
    copied = copied_rows(path, generated_rows(REPO / "reports"))
    assert not copied, (f"{doc_id(path)} repeats rows of a generated table (link the file in "
                        f"reports/ instead): {copied[:3]}")


def test_the_documents_have_links_and_citations_to_check():
    assert relative_links(REPO / "README.md"), "no relative link found in README.md"
    assert any(cited_keys(p) for p in hand_written()), "no metrics key cited in the docs"


def test_readme_is_a_short_guide():
    data = (REPO / "README.md").read_bytes()
    lines = data.decode("utf-8").splitlines()
    assert len(lines) < README_MAX_LINES, (f"README.md has {len(lines)} lines (fewer than "
                                           f"{README_MAX_LINES}: move detail into docs/)")
    assert len(data) < README_MAX_BYTES, (f"README.md has {len(data):,} bytes (fewer than "
                                          f"{README_MAX_BYTES:,}: move detail into docs/)")


def test_link_pattern_reads_both_kinds_and_drops_anchors(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('[a](docs/x.md#part) ![b](img.png "title") [c](https://example.org) '
                    "`[d](in/code.md)` [e](#local)\n```\n[f](in/fence.md)\n```\n",
                    encoding="utf-8")
    assert relative_links(page) == ["docs/x.md", "img.png"]


def test_checker_finds_a_planted_bad_link_anchor_and_key(tmp_path):
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "m.json").write_text(json.dumps(
        {"systems": {"beam": {"all": {"bleu": 12.19}}}, "scores": {"threshold 0.3": {"aer": 0.5}},
         "rows": [{"n": 1}]}), encoding="utf-8")
    (tmp_path / "other.md").write_text("# Other page\n## The curve: `make curve`\n",
                                       encoding="utf-8")
    good = tmp_path / "good.md"
    good.write_text(
        "# Good\nBLEU 12.19 ([`metrics/m.json`](metrics/m.json) `systems.beam.all.bleu`), AER 0.5\n"
        "([m](metrics/m.json) `scores.threshold 0.3.aer`, `rows.0.n`);\n"
        "[o](other.md#the-curve-make-curve),\n"
        "[here](#good). A table's link is not a citation: [m](metrics/m.json) and `dvc repro`.\n"
        "```\n[x](metrics/m.json) `no.such.key` [y](missing.md)\n```\n", encoding="utf-8")
    assert link_problems(good) == []
    assert citation_problems(good) == []
    assert len(cited_keys(good)) == 3

    bad = tmp_path / "bad.md"
    bad.write_text(
        "# Bad\n[gone](metrics/gone.json) [o](other.md#no-such-heading) [s](#nowhere)\n"
        "BLEU 12.19 ([m](metrics/m.json) `systems.beam.all.blue`), [m](metrics/m.json) `rows.3.n`\n"
        "and [g](metrics/gone.json) `systems`\n", encoding="utf-8")
    assert link_problems(bad) == ["missing file: metrics/gone.json",
                                  "no heading #no-such-heading in other.md",
                                  "no heading #nowhere in bad.md",
                                  "missing file: metrics/gone.json"]
    problems = citation_problems(bad)
    assert problems[0] == ("metrics/m.json: no key `systems.beam.all.blue` "
                           "(nothing at 'systems.beam.all.blue')")
    assert problems[1] == "metrics/m.json: no key `rows.3.n` (nothing at 'rows.3')"
    assert problems[2].startswith("metrics/gone.json: cannot read it for `systems`")
    assert len(problems) == 3


def test_checker_finds_a_copied_generated_row(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "table1.md").write_text(
        "| Model | BLEU |\n|---|---|\n| RNNsearch-50 | 12.19 |\n", encoding="utf-8")
    doc = tmp_path / "doc.md"
    doc.write_text("| Model | BLEU |\n|---|---|\n|RNNsearch-50|  12.19|\n| mine | 1.0 |\n",
                   encoding="utf-8")
    assert copied_rows(doc, generated_rows(tmp_path / "reports")) == ["|RNNsearch-50|  12.19|"]


def test_heading_ids(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n## The paper-width curve: `make preset NAME=gpu_curve`\n## Top\n"
                    "### [Linked](x.md) heading, (with) punctuation!\n```\n# not one\n```\n",
                    encoding="utf-8")
    assert heading_ids(page) == {"top", "the-paper-width-curve-make-preset-namegpu_curve", "top-1",
                                 "linked-heading-with-punctuation"}
