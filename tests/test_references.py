"""Every reference to a README section or a docs page resolves, and every docs page is linked from somewhere.

A reference is a section named in quotes after README or a docs page (`README, "Options"`, `README's "Options"`,
`docs/ci.md, "The merge gate"`, `[ci.md](ci.md), "The merge gate"`), a path (`docs/loader.md`, `README.md#options`,
`docs/cost.md#anchor`) or a Markdown link of README.md or docs/ (`[x](loader.md#anchor)`). They are read from the
Python code (help texts included), pyproject.toml, README.md, .github/, .ci/ and docs/. A quoted section resolves to a
heading, or a bold phrase, that starts with it; an anchor to a heading's GitHub anchor."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
CODE = ("torch_perf_suite", "perf_tests", "fixtures", "tests", "examples")

LINK = r"\[[^\]\n]*\]\(([^)\s]+)\)"  # a Markdown link's target
QUOTE = r"(?:'s|,|:)?\s+\\?\"([^\"\\\n]+)\\?\""  # a section named in quotes after it
NAMED = re.compile(r"(?<![\w/.-])(README(?:\.md)?|docs/[\w./-]*\.md)" + QUOTE)
LINKED = re.compile(LINK + r"(?:" + QUOTE + r")?")
PATH = re.compile(r"(?<![\w/.(-])(README\.md|docs/[\w./-]*\w)(#[\w-]+)?")


def headings(page: Path) -> list[str]:
    """The page's headings as plain text, outside its code blocks."""
    found, fenced = [], False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.append(line.lstrip("#").strip().replace("`", "").replace("*", ""))
    return found


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of the page's headings: lower case, punctuation dropped, spaces made hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    for heading in headings(page):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
        if seen[slug]:
            seen[f"{slug}-{seen[slug]}"] = 0
    return set(seen)


def has_section(page: Path, name: str) -> bool:
    name = name.lstrip("#").strip()
    bold = [b.strip() for b in re.findall(r"\*\*([^*\n]+)\*\*", page.read_text())]
    return any(text.startswith(name) for text in headings(page) + bold)


def problem(page: Path, anchor: str | None = None, section: str | None = None) -> str | None:
    """Why a reference to `page` (at `anchor`, or its `section`) does not resolve; None where it does."""
    if not page.exists():
        return "no such file"
    if anchor and anchor.lstrip("#") not in anchors(page):
        return f"no heading with the anchor {anchor}"
    if section and not has_section(page, section):
        return f'no heading "{section}"'
    return None


def broken(source: Path, text: str, root: Path = ROOT) -> list[str]:
    """`source: reference: why` for each reference in `text` (the contents of `source`) that does not resolve."""
    found = []
    for m in NAMED.finditer(text):
        page = root / ("README.md" if m[1] == "README" else m[1])
        found.append((m[0], problem(page, section=m[2])))
    for m in PATH.finditer(text):
        found.append((m[0], problem(root / m[1], anchor=m[2])))
    if source.suffix == ".md":
        for m in LINKED.finditer(text):
            target, _, anchor = m[1].partition("#")
            if re.match(r"[a-z]+:", target):
                continue  # a URL or mailto:
            page = (source.parent / target) if target else source
            found.append((m[0], problem(page, anchor=anchor or None, section=m[2])))
    where = source.relative_to(root) if source.is_relative_to(root) else source
    return [f"{where}: {reference}: {why}" for reference, why in found if why]


def linked_pages(root: Path = ROOT) -> set[Path]:
    """The pages that README.md or another page of docs/ links to."""
    pages = set()
    for source in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        for m in re.finditer(LINK, source.read_text()):
            target = m[1].partition("#")[0]
            if target and not re.match(r"[a-z]+:", target):
                page = (source.parent / target).resolve()
                if page != source.resolve():
                    pages.add(page)
    return pages


def orphans(root: Path = ROOT) -> list[str]:
    """docs/*.md pages that neither README.md nor another page links to."""
    linked = linked_pages(root)
    return [str(page.relative_to(root)) for page in sorted((root / "docs").glob("*.md")) if page.resolve() not in linked]


def sources() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "conftest.py"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted(p for folder in (".github", ".ci") for p in (ROOT / folder).rglob("*") if p.is_file())
    files += sorted(p for folder in CODE for p in (ROOT / folder).rglob("*.py") if ".egg-info" not in str(p))
    return [p for p in files if p != Path(__file__)]


def test_every_reference_resolves():
    found = [line for source in sources() for line in broken(source, source.read_text())]
    assert not found, "references that do not resolve:\n" + "\n".join(found)


def test_every_docs_page_is_linked_from_the_readme_or_another_page():
    assert not orphans(), f"docs pages linked from nowhere (link them from README.md or a docs page): {orphans()}"


def test_a_bad_reference_fails_naming_its_file_and_the_reference(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# T\n\n## Base against head\n\n```bash\n# set-up\n```\n[a](docs/a.md)\n")
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## What it found: a lot\n\n- **A finding.** text\n")
    (tmp_path / "docs" / "orphan.md").write_text("# Nobody links here\n")
    code = tmp_path / "code.py"
    good = ('"(README, \\"Base against head\\")" README\'s "Base against head" docs/a.md, "A finding" '
            'docs/a.md#what-it-found-a-lot README.md#base-against-head https://pytorch.org/docs/stable/x.html')
    assert broken(code, good, tmp_path) == []
    bad = ['README, "Limits"', 'README: "set-up"', "docs/nowhere.md", "docs/a.md#nowhere",
           'docs/a.md, "No such finding"', "README.md#limits"]
    assert broken(code, " ".join(bad), tmp_path) == [f"code.py: {ref}: {why}" for ref, why in [
        (bad[0], 'no heading "Limits"'), (bad[1], 'no heading "set-up"'), (bad[4], 'no heading "No such finding"'),
        (bad[2], "no such file"), (bad[3], "no heading with the anchor #nowhere"),
        (bad[5], "no heading with the anchor #limits")]]
    page = tmp_path / "docs" / "b.md"
    page.write_text("# B page\n")
    links = '[a](a.md) [a](a.md#what-it-found-a-lot), "What it found" [r](../README.md#base-against-head) [x](#b-page)'
    assert broken(page, links, tmp_path) == []
    assert broken(page, "[a](docs/a.md) [a](a.md), \"Gone\" [x](#gone)", tmp_path) == [
        "docs/b.md: [a](docs/a.md): no such file", 'docs/b.md: [a](a.md), "Gone": no heading "Gone"',
        "docs/b.md: [x](#gone): no heading with the anchor gone"]
    assert orphans(tmp_path) == ["docs/b.md", "docs/orphan.md"]
