"""The documentation holds together and its numbers point at committed files.

The committed documents are README.md, docs/*.md and every reports/**/README.md. In each:

- every relative link points at a file or folder of the repository, and a ``#anchor`` into a
  Markdown file at one of its headings (GitHub's heading ids);
- a cited metrics key resolves. The convention (docs/contributing.md, "Numbers in the docs"): a
  number taken from a JSON file (or params.yaml) is quoted next to a link to that file, followed
  by the key path in backquotes, several separated by commas, e.g.
  ``[`metrics/train/search-50.json`](metrics/train/search-50.json) `epochs`, `train_minutes```;
  each key path is resolved in the linked file (dots separate levels, a number indexes a list,
  a key that itself holds a dot, such as ``threshold 0.3``, is matched whole); a link followed
  by ", the same keys" cites the key paths of the citation before it in another file;
- a number taken from a Markdown table of a committed report is cited the same way by its cell,
  ``row | column`` (the row's first cell, or its first two as ``first / second`` where the first
  repeats, and the column's header, as the page shows them), or ``heading :: row | column``
  where two tables of the page share that cell's row and column;
- a number quoted beside a citation is the cited value: every cited key whose value is a number
  must be quoted, at some rounding, in the paragraph (list item, table row) of its citation (see
  ``quotes_value``); a number the sentence derives from the cited keys (a ratio, a sum) is
  allowed only by an entry of ``DERIVED``, which says why;
- no row of a results table the report stage generated is typed into README.md or docs/*.md:
  those tables are linked, not copied.

The README also stays a short guide.
"""
from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Iterator

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
CITATION = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+\.(?:json|yaml|md))>?\)((?:\s*,?\s*`[^`\n]+`)+)")
# ... or "[file](file), the same keys": the key paths of the citation before it, in another file.
SAME_KEYS = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+\.(?:json|yaml|md))>?\),?\s+the same keys")
CELL = " | "            # a Markdown table cell's key: `row | column` (`heading :: row | column`)
MARKUP = re.compile(r"\*\*|`|\[([^\]]*)\]\([^)]*\)")
CELL_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
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


def citations(text: str) -> list[tuple[int, int, str, list[str]]]:
    """The citations of ``text`` in order: (start, end, JSON or YAML file, key paths), "the
    same keys" standing for the key paths of the citation before it."""
    found = sorted([(m.start(), m.end(), m.group(1), re.findall(r"`([^`\n]+)`", m.group(2)))
                    for m in CITATION.finditer(text)]
                   + [(m.start(), m.end(), m.group(1), None) for m in SAME_KEYS.finditer(text)])
    # a Markdown page is cited by its cells only: other code after a link to it is no key
    # (a cell's key written in a Markdown table row escapes its bar: `row \| column`)
    found = [(start, end, file, cited if not file.endswith(".md") or cited is None
              else [key.replace("\\|", "|") for key in cited if CELL in key.replace("\\|", "|")])
             for start, end, file, cited in found]
    found = [c for c in found if c[3] is None or c[3] or not c[2].endswith(".md")]
    keys: list[str] = []
    for i, (start, end, file, cited) in enumerate(found):
        keys = cited if cited is not None else keys
        found[i] = (start, end, file, keys)
    return found


def cited_keys(path: Path) -> list[tuple[str, str]]:
    """The (JSON or YAML file, key path) pairs ``path`` cites (the module docstring says how)."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return [(file, key) for _, _, file, keys in citations(text) for key in keys]


def load_cited(path: Path, file: str, loaded: dict[str, object]) -> object:
    """The parsed JSON, YAML or Markdown ``file`` linked from ``path`` (cached in ``loaded``),
    or the exception that reading it raised."""
    if file not in loaded:
        loaded[file] = parsed(path.parent / file)
    return loaded[file]


_PARSED: dict[tuple[Path, int, int], object] = {}   # by (file, mtime, size): the mutation
                                                    # test checks a page once per number


def parsed(file: Path) -> object:
    """``file`` parsed by its kind (:func:`markdown_cells` for Markdown), or the exception that
    reading it raised; kept while the file is unchanged."""
    try:
        stat = file.stat()
    except OSError as exc:
        return exc
    key = (file.resolve(), stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        try:
            text = file.read_text(encoding="utf-8")
            _PARSED[key] = (json.loads(text) if file.suffix == ".json" else markdown_cells(text)
                            if file.suffix == ".md" else yaml.safe_load(text))
        except (OSError, ValueError, yaml.YAMLError) as exc:
            _PARSED[key] = exc
    return _PARSED[key]


def markdown_cells(text: str) -> dict[str, object]:
    """The cells of a Markdown page's tables by ``row | column`` and ``heading :: row | column``
    (the row's first cell or first two, ``first / second``, the column's header and the heading
    above the table, markup dropped), each the first number the cell shows ("4,267" is 4267, "64.0%" 64.0) or its text
    where it shows none; a ``row | column`` of two tables is kept only with its heading."""
    cells: dict[str, object] = {}
    shared: set[str] = set()
    heading, lines, i = "", text.splitlines(), 0
    while i < len(lines):
        if (m := HEADING.match(lines[i])):
            heading = _plain(m.group(1))
        if not (TABLE_ROW.match(lines[i]) and i + 1 < len(lines)
                and re.fullmatch(r"[|:\s-]+", lines[i + 1])):
            i += 1
            continue
        header, i = _cells(lines[i]), i + 2
        while i < len(lines) and TABLE_ROW.match(lines[i]):
            row = _cells(lines[i])
            for label, first in ((row[0], 1), (" / ".join(row[:2]), 2)):
                for column, cell in zip(header[first:], row[first:]):
                    number = CELL_NUMBER.search(cell)
                    value = float(number.group(0).replace(",", "")) if number else cell
                    key = f"{label}{CELL}{column}"
                    shared |= {key} if key in cells else set()
                    cells[key] = cells[f"{heading} :: {key}"] = value
            i += 1
    return {key: value for key, value in cells.items() if key not in shared}


def _plain(text: str) -> str:
    return MARKUP.sub(lambda m: m.group(1) or "", text).strip()


def _cells(row: str) -> list[str]:
    return [_plain(cell) for cell in row.strip().strip("|").split("|")]


def citation_problems(path: Path) -> list[str]:
    """Each cited key of ``path`` that its linked JSON or YAML file does not have."""
    problems, loaded = [], {}
    for file, key in cited_keys(path):
        data = load_cited(path, file, loaded)
        if isinstance(data, Exception):
            problems.append(f"{file}: cannot read it for `{key}` ({data})")
            continue
        try:
            resolve(data, key)
        except KeyError as exc:
            problems.append(f"{file}: no key `{key}` (nothing at {exc})")
    return problems


# A number as prose quotes it: 1,798,904 / 12.19 / 66% / 0.03 (not the 50 of "RNNsearch-50", the 16
# of "bf16" or the 1 of "L1"; a sign is not read: values are compared by size).
NUMBER = re.compile(r"(?<![\w.])(?<![A-Za-z]-)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?!\d|[.,]\d)(\s?%)?")
# Where a paragraph's unit of text starts: a list item, a table row, a heading.
BLOCK_START = re.compile(r"\s*(?:[-*+]|\d+\.)\s|\s*\||#{1,6}\s")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
DATE_OR_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}:\d{2}\b")   # no quoted values

# Citations whose sentence quotes a number derived from the cited keys, not a key's own value:
# (document, linked file, key) -> why. Keep it short; prefer citing the keys whose values appear.
DERIVED: dict[tuple[str, str, str], str] = {}


def blocks(text: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of ``text``'s units of prose: paragraphs, list items (with their
    continuation lines), table rows and headings; blank lines separate them."""
    spans, start, pos, single = [], None, 0, False
    for line in text.splitlines(keepends=True):
        if not line.strip():
            if start is not None:
                spans.append((start, pos))
            start = None
        elif start is None or single or BLOCK_START.match(line):
            if start is not None:
                spans.append((start, pos))
            start, single = pos, bool(re.match(r"\s*\||#", line))
        pos += len(line)
    if start is not None:
        spans.append((start, pos))
    return spans


def number_spans(text: str, start: int = 0, end: int | None = None
                 ) -> list[tuple[int, int, str]]:
    """(start, end, number as written: ``"1,234.5"``, ``"66%"``) of each number ``text[start:
    end]`` quotes, leaving out those in inline code and link targets (key paths, file names,
    commands); offsets into ``text``."""
    def blank(m: re.Match) -> str:
        return m.group(0)[0] + " " * (len(m.group(0)) - 1)
    masked = DATE_OR_TIME.sub(blank, INLINE_CODE.sub(blank, LINK_TARGET.sub(blank,
                                                                           text[start:end])))
    return [(start + m.start(), start + m.end(1) + len(m.group(2) or ""),
             m.group(1) + (m.group(2) or "") + ("%" if m.group(3) else ""))
            for m in NUMBER.finditer(masked)]


def quoted_numbers(prose: str) -> list[str]:
    """The numbers ``prose`` quotes, as written (:func:`number_spans`)."""
    return [number for _, _, number in number_spans(prose)]


def scoped_citations(text: str) -> list[tuple[int, int, str, list[str]]]:
    """Each citation as (scope start, scope end, file, keys): the numbers it covers are those
    written since the last link before it in its block (paragraph, list item, table row),
    links with no number between them counting as one; so a number is bound to the citation
    that follows it, not to any other number of the paragraph that rounds alike."""
    links = sorted((m.start(), m.end()) for m in LINK.finditer(text))
    every = citations(text)
    found = []
    for block_start, block_end in blocks(text):
        for start, _, file, keys in (c for c in every if block_start <= c[0] < block_end):
            scope, pos = block_start, start
            for link_start, link_end in reversed([(a, b) for a, b in links
                                                  if block_start <= a and b <= start]):
                if number_spans(text, link_end, pos):
                    scope = link_end
                    break
                pos = link_start
            found.append((scope, start, file, keys))
    return found


def quotes_value(quoted: str, value: float) -> bool:
    """True when the number ``quoted`` (as :func:`quoted_numbers` gives it) is ``value`` at the
    rounding it is written to: ``value`` rounded to the quoted decimals gives it (1.0749 is
    "1.07" or "1.075"; 5247.6 is "5,248"), or, written with "%", ``value`` x 100 does (0.66 is
    "66%"); a whole number ending in zeros may round to its last non-zero digit (15,044.9 is
    "15,000", with two significant digits kept). Sizes are compared, not signs. A whole number
    of one significant digit ("8") must equal ``value`` (0.03's decimals say its rounding): such
    small numbers stand in prose for many other things (cores, threads, list items).
    """
    percent = quoted.endswith("%")
    digits = quoted.rstrip("%").replace(",", "")
    number = Decimal(digits)
    size = abs(Decimal(repr(float(value))))
    sizes = [size, size * 100] if percent else [size]
    if "." in digits:
        places = [len(digits.partition(".")[2])]
    else:
        zeros = len(digits) - len(digits.rstrip("0")) if number else 0
        places = [-z for z in range(zeros + 1)                    # 15,000: units ... thousands
                  if len(digits.lstrip("0")) - z >= 2]            # two significant digits kept
        if not places:
            return any(s == number for s in sizes)
    return any(abs(s - number) <= Decimal(5) * Decimal(10) ** (-p - 1) * (1 + Decimal("1e-9"))
               for s in sizes for p in places)


def checked_values(path: Path, text: str, derived: dict[tuple[str, str, str], str] = DERIVED
                   ) -> dict[tuple[int, int], list[tuple[str, str, float]]]:
    """``{scope: [(file, key, value)]}``: the numeric cited keys of ``text`` (the page
    ``path``, whose folder its links start from) by the scope their citation covers
    (:func:`scoped_citations`), but the ``derived`` entries."""
    found: dict[tuple[int, int], list[tuple[str, str, float]]] = {}
    for start, end, file, key, value in cited_values(path, text):
        if (not isinstance(value, bool) and isinstance(value, (int, float))
                and (doc_id(path), file, key) not in derived):
            found.setdefault((start, end), []).append((file, key, value))
    return found


def cited_values(path: Path, text: str) -> Iterator[tuple[int, int, str, str, object]]:
    """(scope start, scope end, file, key, value) of each key ``text`` cites that its file has
    (:func:`scoped_citations`; a missing key: test_every_cited_metrics_key_exists)."""
    loaded: dict[str, object] = {}
    for start, end, file, keys in scoped_citations(text):
        data = load_cited(path, file, loaded)
        for key in keys:
            try:
                value = resolve(data, key)
            except (KeyError, TypeError):
                continue
            yield start, end, file, key, value


def page_text(path: Path) -> str:
    """``path``'s text with its code blocks blanked (offsets kept)."""
    return FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), path.read_text(encoding="utf-8"))


def number_problems(path: Path, derived: dict[tuple[str, str, str], str] = DERIVED,
                    text: str | None = None) -> list[str]:
    """What the numbers of ``path`` (or of ``text`` as that page) get wrong about its cited
    keys, in the text each citation covers (:func:`scoped_citations`): a numeric key's value
    that no number there quotes (:func:`quotes_value`), and a number that quotes a cited value
    without being the only one that quotes some cited value (an edit of it could pass, the
    other number still quoting the value: a value quoted twice, or a round "390" beside "394");
    naming the line, the keys and the numbers. The (document, file, key) entries of
    ``derived`` are not checked."""
    text = page_text(path) if text is None else text
    problems = []
    for (start, end), cited in checked_values(path, text, derived).items():
        line = text.count("\n", 0, end) + 1
        numbers = quoted_numbers(text[start:end])
        quoters = {value: {i for i, n in enumerate(numbers) if quotes_value(n, value)}
                   for _, _, value in cited}
        for file, key, value in cited:
            if not quoters[value]:
                problems.append(f"{doc_id(path)}:{line}: {file} `{key}` is {value!r}, but the "
                                f"numbers it covers are {numbers or 'none'}")
        sole = {next(iter(q)) for q in quoters.values() if len(q) == 1}
        loose = [numbers[i] for i in sorted(set().union(*quoters.values()) - sole)]
        if loose:
            problems.append(f"{doc_id(path)}:{line}: {loose} quote a value of "
                            f"{', '.join(f'`{k}`' for _, k, _ in cited)} that another number "
                            f"there quotes too, so an edit of one could pass: quote each cited "
                            f"value once (with its decimals where a round number is near)")
    return problems


def one_digit_off(number: str) -> str:
    """``number`` with its last significant digit changed by one (``12.19`` -> ``12.10``,
    ``15,000`` -> ``16,000``, ``66%`` -> ``67%``): the smallest edit its rounding cannot hide."""
    digits = [i for i, c in enumerate(number) if c.isdigit()]
    last = next((i for i in reversed(digits) if number[i] != "0" or "." in number), digits[-1])
    digit = int(number[last])
    return number[:last] + str(digit + 1 if digit < 9 else 8) + number[last + 1:]


def mutations(path: Path) -> list[tuple[str, str]]:
    """(where, edited page) for each number that quotes a cited value: the page with that
    number one digit off (:func:`one_digit_off`)."""
    text, found = page_text(path), []
    for (start, end), cited in checked_values(path, text).items():
        for at, until, number in number_spans(text, start, end):
            if any(quotes_value(number, value) for _, _, value in cited):
                line = text.count("\n", 0, at) + 1
                found.append((f"{doc_id(path)}:{line} {number} -> {one_digit_off(number)}",
                              text[:at] + one_digit_off(number) + text[until:]))
    return found


def numeric_citations(path: Path) -> list[tuple[str, str]]:
    """The (file, key) pairs ``path`` cites whose value is a number: what ``number_problems``
    checks (a ``DERIVED`` entry included)."""
    loaded, found = {}, []
    for file, key in cited_keys(path):
        try:
            value = resolve(load_cited(path, file, loaded), key)
        except (KeyError, TypeError):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            found.append((file, key))
    return found


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
    try:
        return str(path.relative_to(REPO))
    except ValueError:                                    # a page the unit tests write
        return path.name


@pytest.mark.parametrize("path", documents(), ids=doc_id)
def test_every_relative_link_resolves(path):
    problems = link_problems(path)
    assert not problems, f"{doc_id(path)}: {problems}"


@pytest.mark.parametrize("path", documents(), ids=doc_id)
def test_every_cited_metrics_key_exists(path):
    problems = citation_problems(path)
    assert not problems, f"{doc_id(path)}: {problems}"


@pytest.mark.parametrize("path", documents(), ids=doc_id)
def test_every_cited_number_is_quoted_beside_its_key(path):
    problems = number_problems(path)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", documents(), ids=doc_id)
def test_every_checked_number_one_digit_off_is_caught(path):
    """The checker's own reach: each number that quotes a cited key, changed by one digit,
    must make the page fail (was: 8 of 11 such edits passed, another number of the paragraph
    rounding to the key's value)."""
    escaped = [where for where, edited in mutations(path)
               if not number_problems(path, text=edited)]
    assert not escaped, f"edits the checker misses: {escaped}"


def section_citations(path: Path) -> list[str]:
    """Each citation of ``path`` of a whole section (a key holding a mapping or a list) whose
    text quotes numbers: they are checked against nothing, so a one-digit edit of one passes;
    naming the line, the file and the key."""
    text, found = page_text(path), []
    for start, end, file, key, value in cited_values(path, text):
        numbers = quoted_numbers(text[start:end])
        if numbers and isinstance(value, (dict, list)):
            found.append(f"{doc_id(path)}:{text.count(chr(10), 0, end) + 1}: {file} `{key}` "
                         f"is a section, and {numbers} are checked against none of its values")
    return found


@pytest.mark.parametrize("path", documents(), ids=doc_id)
def test_numbers_cite_the_keys_they_quote_not_a_whole_section(path):
    """Was: 15 citations of a whole section (``systems.beam.by_length``, a profile's
    ``categories``) left their numbers unchecked. Cite the exact keys (``...by_length.0-10.n``)."""
    found = section_citations(path)
    assert not found, "\n".join(found)


def test_every_derived_number_entry_names_a_citation():
    cited = {(doc_id(p), file, key) for p in documents() for file, key in numeric_citations(p)}
    assert set(DERIVED) <= cited, f"DERIVED entries no document cites: {set(DERIVED) - cited}"


@pytest.mark.parametrize("path", hand_written(), ids=doc_id)
def test_no_generated_table_is_copied(path):
    copied = copied_rows(path, generated_rows(REPO / "reports"))
    assert not copied, (f"{doc_id(path)} repeats rows of a generated table (link the file in "
                        f"reports/ instead): {copied[:3]}")


def test_the_documents_have_links_and_citations_to_check():
    assert relative_links(REPO / "README.md"), "no relative link found in README.md"
    assert any(cited_keys(p) for p in hand_written()), "no metrics key cited in the docs"
    assert sum(len(numeric_citations(p)) for p in documents()) >= 100, "few numbers cited"


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


def test_quoted_numbers_and_their_rounding():
    assert quoted_numbers("RNNsearch-50 read 1,798,904 words/s (bf16, 1.3-1.6 epochs, 66 % of "
                          "`key.20` [x](m-30.json), torch 2.13.0, 0.98x)") == [
        "1,798,904", "1.3", "1.6", "66%", "0.98"]
    assert quotes_value("1.07", 1.0749) and quotes_value("1.075", 1.0749)
    assert quotes_value("1.1", 1.0749) and not quotes_value("1.08", 1.0749)
    assert not quotes_value("1", 1.0749)                  # one digit: exact only
    assert quotes_value("5,248", 5247.6) and quotes_value("1,798,904", 1798904.4)
    assert quotes_value("66%", 0.66) and quotes_value("54%", 0.5398) and quotes_value("40%", 40)
    assert not quotes_value("66", 0.66)                   # x 100 only when written as a percentage
    assert quotes_value("0.03", 0.0297) and quotes_value("0.001", 0.000999000999)
    assert quotes_value("15,000", 15044.9) and not quotes_value("15,000", 15600)
    assert quotes_value("12", 12.19) and quotes_value("2.5", -2.5)
    assert quotes_value("8", 8) and quotes_value("8.5", 8.48)
    assert not quotes_value("8", 8.48) and not quotes_value("1,000", 1400)   # one digit: exact


def test_checker_finds_a_planted_wrong_number(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps(
        {"speedup": 1.0749, "rate": 5247.6, "share": 0.66, "runs": 3, "name": "x", "ok": True}),
        encoding="utf-8")
    (tmp_path / "n.json").write_text(json.dumps({"speedup": 1.5316}), encoding="utf-8")
    good = tmp_path / "good.md"
    good.write_text(
        "# Good\nFused loss 1.07x at 5,248 tokens/s, 66% of the roofline, 3 runs\n"
        "([m](m.json) `speedup`, `rate`, `share`, `runs`, `name`, `ok`); 1.53x with bf16\n"
        "([n](n.json), the same keys).\n\n- an item: 1.075 ([m](m.json) `speedup`)\n\n"
        "| a row | 1.07 ([m](m.json) `speedup`) |\n\n```\n9.99 [m](m.json) `speedup`\n```\n",
        encoding="utf-8")
    assert number_problems(good) == []
    assert len(numeric_citations(good)) == 7

    bad = tmp_path / "bad.md"
    bad.write_text(
        "Fused loss 1.08x ([m](m.json) `speedup`).\n\nIts 5,248 tokens/s are in this paragraph,\n\n"
        "- not in this item ([m](m.json) `rate`)\n\nIntel: 1.07x ([m](m.json) `speedup`); AMD:\n"
        "1.07x too ([n](n.json), the same keys)\n", encoding="utf-8")
    assert number_problems(bad) == [
        "bad.md:1: m.json `speedup` is 1.0749, but the numbers it covers are ['1.08']",
        "bad.md:5: m.json `rate` is 5247.6, but the numbers it covers are none",
        "bad.md:8: n.json `speedup` is 1.5316, but the numbers it covers are ['1.07']"]
    assert len(number_problems(bad, {("bad.md", "m.json", "rate"): "a sum of two keys"})) == 2


def test_a_number_from_a_markdown_table_is_checked_against_the_cell_it_cites(tmp_path):
    """Was: a number cited to a report's Markdown table was checked by no one. A cell is cited
    as `row | column` (in a table row `row \\| column`), or with its heading where two tables
    share it; other code after a link to a Markdown page is no citation."""
    (tmp_path / "t.md").write_text(
        "# Report\n\n### Table 1\n\n| model | BLEU | speed |\n|---|---:|---:|\n"
        "| **RNNsearch-50** | 12.19 (1.117) | 4,267 |\n| RNNencdec-50 | 5.01 | 64.0% |\n\n"
        "### Again\n\n| model | BLEU |\n|---|---|\n| RNNencdec-50 | 4.99 |\n", encoding="utf-8")
    good = tmp_path / "good.md"
    good.write_text(
        "RNNsearch-50 scores 12.19 at 4,267 words/s ([t](t.md) `RNNsearch-50 | BLEU`,\n"
        "`RNNsearch-50 | speed`); RNNencdec-50 5.01 and 4.99 ([t](t.md)\n"
        "`Table 1 :: RNNencdec-50 | BLEU`, `Again :: RNNencdec-50 | BLEU`), at 64.0%\n"
        "([t](t.md) `RNNencdec-50 | speed`). See [t](t.md) `make report`.\n\n"
        "| in a table row | 12.19 ([t](t.md) `RNNsearch-50 \\| BLEU`) |\n", encoding="utf-8")
    assert number_problems(good) == [] and citation_problems(good) == []
    assert len(numeric_citations(good)) == 6 and len(mutations(good)) == 6
    bad = tmp_path / "bad.md"
    bad.write_text("RNNsearch-50 scores 12.18 ([t](t.md) `RNNsearch-50 | BLEU`), RNNencdec-50\n"
                   "4.99 ([t](t.md) `RNNencdec-50 | BLEU`).\n", encoding="utf-8")
    assert number_problems(bad) == [
        "bad.md:1: t.md `RNNsearch-50 | BLEU` is 12.19, but the numbers it covers are ['12.18']"]
    assert citation_problems(bad) == [
        "t.md: no key `RNNencdec-50 | BLEU` (nothing at 'RNNencdec-50 | BLEU')"]


def test_a_number_another_number_also_quotes_is_refused_so_no_one_digit_edit_passes(tmp_path):
    """Was: a key was checked against every number of its paragraph, so its quoted "394"
    could be edited freely beside a "390" that rounds to it too, and a p-value quoted twice
    could lose one of its two. Now each cited value needs a number that alone quotes it, and
    every one-digit edit of a quoted number fails the page (the mutation test's rule)."""
    (tmp_path / "q.json").write_text(json.dumps({"before": 389.6, "after": 393.8, "p": 0.001}),
                                     encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("At 390 GFLOP/s before and 394 after ([q](q.json) `before`, `after`).\n\n"
                    "p = 0.001 and again 0.001 ([q](q.json) `p`).\n\n"
                    "At 389.6 before and 393.8 after, on 2026-12-03 at 22:35\n"
                    "([q](q.json) `before`, `after`).\n", encoding="utf-8")
    assert [problem.split(" quote ")[0] for problem in number_problems(page)] == [
        "page.md:1: ['394']", "page.md:3: ['0.001', '0.001']"]
    page.write_text("At 389.6 before and 393.8 after ([q](q.json) `before`, `after`).\n",
                    encoding="utf-8")
    assert number_problems(page) == [] and len(mutations(page)) == 2
    assert all(number_problems(page, text=edited) for _, edited in mutations(page))


MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:tmp|root|home|work)/")


def test_no_report_page_names_a_folder_of_the_machine_that_made_it():
    """Was: six bench pages printed their ``--out`` folder (/tmp/bench2, /root/out): a path of
    one machine, which no reader can repeat. The bench now leaves ``--out`` out of the command
    it prints; the pages (and their JSON) say the command as another machine would run it."""
    pages = [p for p in (REPO / "reports").rglob("*") if p.suffix in (".md", ".json")]
    named = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in pages
             for m in [MACHINE_PATH.search(p.read_text(encoding="utf-8"))] if m]
    assert named == []
