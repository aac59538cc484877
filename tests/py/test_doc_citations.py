"""Every citation of the docs in the tree resolves: `docs/X.md` names a file
of docs/, and `X.md, "Y"` (in code, headers, tests, benches and the docs
themselves) names a heading of X.md or a bold lead-in of one of its
paragraphs or list items ("- **Spans.** ..."), by its first words. A
section renamed or removed without its citations fails here."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SUFFIXES = {".py", ".c", ".h", ".cpp", ".md", ".sh", ".toml", ".txt", ".pyi"}
SKIP = (".venv", "build", ".git", ".mesonpy", "__pycache__", "out")

# `X.md, "Y"`, with the quotes escaped too (a citation inside a string).
CITE = re.compile(r'\b([a-z0-9_-]+\.md),\s+\\?"([^"\\]+)\\?"')
DOC_PATH = re.compile(r"\bdocs/([a-z0-9_-]+\.md)\b")
HEADING = re.compile(r"^#+\s+(.*)$", re.M)
LEAD_IN = re.compile(r"^\s*(?:[-*]\s+|\d+\.\s+)?\*\*([^*]+)\*\*", re.M)


def tree_files():
    for p in sorted(ROOT.rglob("*")):
        rel = p.relative_to(ROOT)
        if p.is_file() and p.suffix in SUFFIXES and not any(part.startswith(SKIP) for part in rel.parts):
            yield p


def joined(text: str) -> str:
    """The text with wrapped lines joined: a comment's or docstring's
    continuation marks (#, *, //) and adjacent string literals ("..."
    f"...") dropped, so a citation split over lines reads as one."""
    text = re.sub(r'"\s*\n\s*[fr]?"', "", text)
    return re.sub(r"\s*\n\s*(?:#|\*(?!\*)|//)?\s*", " ", text)


def anchors(doc: pathlib.Path) -> list[str]:
    t = doc.read_text()
    return [a.replace("`", "").strip() for a in HEADING.findall(t) + LEAD_IN.findall(t)]


def test_every_cited_section_and_docs_file_exists():
    known = {d.name: anchors(d) for d in DOCS.glob("*.md")}
    assert "design.md" in known and "profile.md" in known
    missing_files, missing_sections, seen = set(), set(), 0
    for f in tree_files():
        text = joined(f.read_text(errors="replace"))
        rel = str(f.relative_to(ROOT))
        for name in DOC_PATH.findall(text):
            if name not in known:
                missing_files.add((rel, "docs/" + name))
        for doc, section in CITE.findall(text):
            if doc not in known:
                continue  # not one of ours (README.md in another tree), or missing above
            seen += 1
            want = section.replace("`", "").strip()
            if not any(a.startswith(want) for a in known[doc]):
                missing_sections.add((rel, doc, section))
    assert seen > 50  # the pattern still finds the tree's citations
    assert not missing_files, f"cited docs files that do not exist: {sorted(missing_files)}"
    assert not missing_sections, f"citations that resolve to no heading or lead-in: {sorted(missing_sections)}"


def test_a_citation_to_a_section_that_is_not_there_is_found(tmp_path):
    """The rule itself: a heading's first words resolve, a lead-in does, a
    made-up section does not (so the test above can fail)."""
    doc = tmp_path / "x.md"
    doc.write_text("# Title\n\n## After the run: summary\n\n- **Spans.** text\n")
    a = anchors(doc)
    assert any(x.startswith("After the run") for x in a) and any(x.startswith("Spans") for x in a)
    assert not any(x.startswith("Nowhere") for x in a)
    text = joined('note = ("see x.md, "\n    f"\\"After the run\\"")')
    assert CITE.findall(text) == [("x.md", "After the run")]
