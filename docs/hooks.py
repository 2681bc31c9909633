"""MkDocs hook: the README as the home page and one page per rule document, made at build time from the files
themselves (copies would go stale), and links written for the repository mapped onto the site's pages.

Every page keeps links that work where it lives in the repository (on GitHub, README.md links `docs/usage.md` and
`rules/PFL101-....md`; docs/usage.md links `../rules/PFL101-....md`); each link is resolved from the page's file in
the repository and, when it lands on a file the site publishes, rewritten to that page's place in the site. A link
to anything else is left alone, so that strict mode reports it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path, PurePosixPath

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
HOME = "index.md"
# A Markdown link's target: what stands in `](...)`, up to an optional anchor.
LINK = re.compile(r"\]\((?P<target>[^)\s#]*)(?P<anchor>#[^)\s]*)?\)")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def _rule_documents() -> list[Path]:
    return sorted(RULES.glob("PFL*.md"))


def _repository_path(site_path: str, config: MkDocsConfig) -> PurePosixPath:
    """The file a page of the site comes from, relative to the repository."""
    if site_path == HOME:
        return PurePosixPath("README.md")
    if site_path.startswith("rules/") and (RULES / site_path.removeprefix("rules/")).is_file():
        return PurePosixPath(site_path)
    docs = Path(config.docs_dir).resolve().relative_to(REPO).as_posix()
    return PurePosixPath(docs) / site_path


def _site_path(repository_path: str, config: MkDocsConfig) -> str | None:
    """The page of the site that publishes a repository file, if one does."""
    docs = Path(config.docs_dir).resolve().relative_to(REPO).as_posix() + "/"
    if repository_path == "README.md":
        return HOME
    if repository_path.startswith(docs):
        return repository_path.removeprefix(docs)
    if repository_path.startswith("rules/") and (REPO / repository_path).is_file():
        return repository_path
    return None


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """List every rule page in the navigation, under the section whose first page is rules/index.md."""
    for entry in config.nav or []:
        if isinstance(entry, dict):
            (pages,) = entry.values()
            if isinstance(pages, list) and "rules/index.md" in pages:
                pages.extend({path.stem.replace("-", " ", 1): f"rules/{path.name}"} for path in _rule_documents())
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, HOME, content=(REPO / "README.md").read_text(encoding="utf-8")))
    for path in _rule_documents():
        files.append(File.generated(config, f"rules/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    source = _repository_path(page.file.src_uri, config)

    def relink(match: re.Match[str]) -> str:
        target, anchor = match["target"], match["anchor"] or ""
        if not target or SCHEME.match(target) or target.startswith("/"):
            return match[0]
        repository_path = posixpath.normpath(posixpath.join(str(source.parent), target))
        site_path = _site_path(repository_path, config)
        if site_path is None:
            return match[0]
        return f"]({posixpath.relpath(site_path, posixpath.dirname(page.file.src_uri) or '.')}{anchor})"

    return LINK.sub(relink, markdown)
