"""Phase 2 of the project model: the file summaries linked, and the questions rules ask about the project.

Demand-driven, so that a pre-commit run on one file stays fast: a file is summarised only when a question
needs it (a name it may define or call is in its bytes), from the tree already parsed when it is the file
being checked, else parsed once; summaries are cached by content. Every answer is plain data (None, bools,
lists), so that a cached result can be trusted only while the same questions still get the same answers.
"""

from __future__ import annotations

import ast
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import astuple, dataclass, field
from typing import TYPE_CHECKING, Literal

from pitfall_lint.analysis.distributed import SPAWNERS, may_set_up_distributed, sets_up_distributed
from pitfall_lint.analysis.evidence import WRAPPED_ITSELF, WRAPPED_UNKNOWN, Evidence, WrapperKind
from pitfall_lint.analysis.scopes import definition_name
from pitfall_lint.analysis.wrap_calls import WRAPPER_CALL_OR_ALIAS, may_call_ddp
from pitfall_lint.hashing import blake2b
from pitfall_lint.project.dependencies import declared_floor, manifests, read_manifest
from pitfall_lint.project.layout import Layout
from pitfall_lint.project.store import SETS_UP, SummaryStore, content_key
from pitfall_lint.source import WORDS_ONLY, distinct_words

# The summaries' code and the analyses the questions use are imported where a summary is read or a question asked:
# a run whose results all hold (a warm run, a file no rule triggers on) needs neither.
if TYPE_CHECKING:
    from pitfall_lint.config import TargetVersion
    from pitfall_lint.context import FileContext
    from pitfall_lint.parsing import ParsedSource
    from pitfall_lint.project.summary import CallSite, ClassFacts, FileSummary, WrapSite

DataParallelMode = Literal["auto", "always", "never"]
DATA_PARALLEL_MODES: tuple[DataParallelMode, ...] = ("auto", "always", "never")
# What can name a function or a module: a name asked about that is not one (`01_train`) is in no file.
_IDENTIFIER = re.compile(rb"[A-Za-z_]\w*")
# A file changed this lately is read again next time: a second change within the same tick of the file system's clock
# would leave its size and time of change as they were.
_RACY_NS = 2_000_000_000
_MAX_DEPTH = 3  # call-graph and builder hops followed from a definition
# Searches of every file's bytes for a name that cost as much as listing every file's identifiers once (measured:
# 12 on Lightning, 20 on diffusers).
_SEARCHES_BEFORE_LISTING = 16
# The candidates the first pass of summaries_wanted names for a walk of their set-ups: whether a project trains in
# parallel is read from them only until the first that sets training up, so each pass names twice as many as the last
# (Lightning's answer is its 11th candidate; a project that trains nothing has every candidate read).
_FIRST_SET_UP_WALKS = 4
_DP_STRATEGY = (b'"dp"', b"'dp'")
_LIGHTNING_ENTRIES = (b"Fabric(",)
_COMPILE = "torch.compile"
_SPAWN_WORDS = tuple(sorted({name.rpartition(".")[2].encode() for name in SPAWNERS}))

# A wrap calls the wrapper by its name (spaces or a line continuation may stand before the parenthesis) or by an
# alias its import gives it; most files that name DDP only import it for a type or check an instance (diffusers: 31
# files name it, none calls it). Each pattern starts with its word, which lets the search skip to it (a lookbehind
# or an alternation made the search 30 times slower).
_FUNCTIONAL_DP_CALL = re.compile(rb"data_parallel[\s\\]*\(")


def may_wrap_in_data_parallel(data: bytes) -> bool:
    """Whether a file can hold a DataParallel wrap site: a call or alias of the wrapper (DistributedDataParallel
    aside), a Lightning Trainer/Fabric given "dp", or transformers' Trainer. Read from the bytes: most files
    that mention DataParallel only use DDP, and need no summary."""
    if b"DataParallel" in data:  # the cheap look first
        for found in WRAPPER_CALL_OR_ALIAS.finditer(data):
            if not data.endswith(b"Distributed", 0, found.start()):
                return True
    if b"data_parallel" in data and _FUNCTIONAL_DP_CALL.search(data):
        return True
    # The rarer word of each pair first: every file of a large project is read this way.
    if any(word in data for word in _LIGHTNING_ENTRIES) and any(word in data for word in _DP_STRATEGY):
        return True
    return b"Trainer(" in data and b"transformers" in data


# What the model asks of every file's bytes, kept in each file's stamp: a file whose stamp holds is not read for them.
_BYTE_FACTS: dict[str, Callable[[bytes], bool]] = {
    "may-wrap-in-data-parallel": may_wrap_in_data_parallel,
    "may-wrap-in-ddp": may_call_ddp,
    "may-set-up-distributed": may_set_up_distributed,
}
_FACT_NAMES = list(_BYTE_FACTS)
# What a stamp holds of a file's status: its size, its time of change, and the time its status changed (which no tool
# can set back, as `touch -r` or a copy that keeps the times sets the time of change); its content key follows.
_KEY = 3


def _status(status: os.stat_result) -> tuple[int, int, int]:
    return status.st_size, status.st_mtime_ns, status.st_ctime_ns

Symbol = tuple[str, ...]  # ("class" | "function", path, scope path), ("external", ref) or ("unknown",)
_UNKNOWN: Symbol = ("unknown",)


# The kinds of WrapSite that are not nn.DataParallel, whatever the framework.
_DISTRIBUTED_WRAPS = frozenset({"DistributedDataParallel", "FullyShardedDataParallel"})


@dataclass(frozen=True)
class _Definitions:
    classes: dict[str, ClassFacts]
    functions: dict[str, int]  # name -> line
    nested: dict[str, list[str]]  # a class defined inside a function, by its own name -> its scope paths


@dataclass
class _Reach:
    """Which module classes a wrapper can run: every class (`everything`, with the wraps' evidence) and the ones
    in `classes`, each with the evidence of the wraps that reach it: of wraps that differ only in their place, the
    first (every question asks for the first wrap of some holder and options, and a long file wraps the same way
    thousands of times: keeping them all made each question read them all)."""

    everything: list[Evidence] = field(default_factory=list)
    chosen: bool = False  # `everything` set by the user (data-parallel = "always"), not assumed
    classes: dict[tuple[str, str], list[Evidence]] = field(default_factory=dict)
    _kept: set[tuple] = field(default_factory=set)

    def add(self, cls: tuple[str, str] | None, evidence: Evidence) -> None:
        """Evidence that the wrap runs the class (None: every class)."""
        kept = (cls, *_way_of_wrapping(evidence))
        if kept not in self._kept:
            self._kept.add(kept)
            (self.everything if cls is None else self.classes.setdefault(cls, [])).append(evidence)


# Python's own classes that are never an nn.Module, as bases spell them once resolved.
_PLAIN_PYTHON_CLASSES = frozenset({"object", "Exception", "dict", "list", "tuple", "str", "int", "float"})
_PLAIN_PYTHON_MODULES = ("abc.", "typing.", "enum.", "dataclasses.", "collections.", "contextlib.", "threading.")


def _is_plain_python_class(name: str) -> bool:
    return name in _PLAIN_PYTHON_CLASSES or name.startswith(_PLAIN_PYTHON_MODULES)


class ProjectModel:
    """The files of one project; rules reach it through FileContext.project (a ProjectView)."""

    def __init__(
        self,
        root: str,
        files: Iterable[str],
        data_parallel: DataParallelMode = "auto",
        store: SummaryStore | None = None,
        contents: dict[str, bytes] | None = None,
        target: TargetVersion | None = None,
        documents: Iterable[str] = (),
    ) -> None:
        self.root = os.path.abspath(root)
        self.files = tuple(sorted(dict.fromkeys(os.path.abspath(f) for f in files)))
        # The shell scripts, Makefiles and documentation that may write how the project's scripts are launched.
        self.documents = tuple(sorted(dict.fromkeys(os.path.abspath(f) for f in documents)))
        self.data_parallel = data_parallel
        self.target = target  # the project's oldest Python, when known: newer syntax in its files is reported
        self._store = store if store is not None else SummaryStore(None)
        self._contents: dict[str, bytes | None] = {os.path.abspath(k): v for k, v in (contents or {}).items()}
        self._layout = Layout(self.root, self.files)
        self._summaries: dict[str, FileSummary | None] = {}  # by content key
        self._keys: dict[str, str] = {}  # content key by path
        self._trees: dict[str, object] = {}  # path -> FileContext of a file being checked right now
        self._checked: str | None = None  # the file whose check asks now: its tree serves the check too
        self._last_parse: tuple[str, bytes, ParsedSource] | None = None  # of a summary, for the file's check (parse)
        self._memo: dict[tuple, object] = {}
        self._scans = 0  # words searched for in the files' bytes, before every file's identifiers are listed
        self._fresh: dict[str, list] = {}
        self._read_as: dict[str, tuple[int, int, int]] = {}  # the _status of each file read from disk, as it was read
        self._stamps: dict[str, list | None] = {}  # each stamp looked at, None where it no longer holds
        self._started = time.time_ns()
        # While the summaries prepare_shared reads are gathered: those it would compute here, each taken as None, and
        # the files it would walk for their set-ups alone, each taken as unknown; how many a pass names of those.
        self._wanted: set[str] | None = None
        self._walks_wanted: set[str] = set()
        self._walks_ahead = _FIRST_SET_UP_WALKS
        self._guesses = 0  # how many times such a pass took a summary as None, or read an answer that rests on one
        self._guessed: set[tuple] = set()  # the memo's keys whose answers rest on a guess of this pass

    def __getstate__(self) -> dict[str, object]:
        """For workers started with `spawn`: the files and settings; facts are worked out again there."""
        state = dict(self.__dict__)
        state.update(_trees={}, _memo={}, _fresh={}, _last_parse=None, _checked=None)
        return state

    @classmethod
    def single_file(cls, path: str, data: bytes) -> ProjectModel:
        """A file checked on its own (tests, flake8 without a project around it)."""
        absolute = os.path.abspath(path)
        return cls(os.path.dirname(absolute), [absolute], contents={absolute: data})

    # -- files and summaries

    def _content(self, path: str) -> bytes | None:
        if path not in self._contents:
            try:
                with open(path, "rb") as handle:
                    status = os.fstat(handle.fileno())  # before the read: a change after it shows in the next stamp
                    self._contents[path] = handle.read()
                self._read_as[path] = _status(status)
            except OSError:
                self._contents[path] = None
        return self._contents[path]

    def content(self, path: str) -> bytes | None:
        """The file's bytes as the model read them (once: what it reads next is what it read first); None where it
        cannot be read."""
        return self._content(os.path.abspath(path))

    def _stamp(self, path: str) -> list | None:
        """The file's stamp while it still holds (its _status unchanged): [*status, content key, then each of
        _BYTE_FACTS]; None when the file must be read."""
        if path in self._contents or not self._store.keeps:
            return None
        if path not in self._stamps:
            stamp = self._store.stamps.get(path)
            try:
                status = os.stat(path)
                holds = isinstance(stamp, list) and len(stamp) == _KEY + 1 + len(_BYTE_FACTS) and stamp[:_KEY] == [*_status(status)]
            except OSError:
                holds = False
            self._stamps[path] = stamp if holds else None
        return self._stamps[path]

    def _restamp(self, path: str, key: str, data: bytes) -> None:
        """Stamp a file read from disk, unless it changed so lately that a change within the same tick of the clock
        could follow unseen (git's racy files)."""
        read_as = self._read_as.get(path)
        if read_as is not None and self._store.keeps and read_as[1] < self._started - _RACY_NS:  # its time of change
            stamp = [*read_as, key, *(test(data) for test in _BYTE_FACTS.values())]
            self._store.stamp(path, stamp)
            self._stamps[path] = stamp

    def offer(self, path: str, ctx: object, data: bytes) -> None:
        """The file being checked: its parsed tree serves its summary, and its content is what is checked."""
        path = os.path.abspath(path)
        if self._contents.get(path, data) != data:  # checked as rewritten in memory (--fix)
            self._keys.pop(path, None)
            self._memo.clear()  # facts derived from the old content no longer hold
        if path not in self.files:
            self.files = tuple(sorted({*self.files, path}))
            self._layout = Layout(self.root, self.files)
        self._contents[path] = data
        self._trees[path] = ctx

    def withdraw(self, path: str) -> None:
        self._trees.pop(os.path.abspath(path), None)
        self._checked = None

    def take_fresh_summaries(self) -> dict[str, list]:
        """Summaries computed since the last call, by content key, for the caller to cache."""
        fresh, self._fresh = self._fresh, {}
        return fresh

    def _key(self, path: str) -> str | None:
        if path in self._keys:
            return self._keys[path]
        stamp = self._stamp(path)
        if stamp is not None:
            self._keys[path] = stamp[_KEY]
            return stamp[_KEY]  # type: ignore[no-any-return]
        data = self._content(path)
        if data is None:
            return None
        key = self._keys[path] = content_key(data)
        self._restamp(path, key, data)
        return key

    def _holds(self, path: str, fact: str) -> bool:
        """One of _BYTE_FACTS of the file: from its stamp while it holds, else from its bytes (where the stamps are
        kept, the file is stamped with all of them, for the next run; else its content key is not worked out for it)."""
        stamp = self._stamp(path)
        if stamp is None:
            data = self._content(path)
            if data is None:
                return False
            if self._store.keeps:
                key = self._key(path)
                stamp = self._stamps.get(path)
                if stamp is not None and stamp[_KEY] != key:
                    stamp = None  # of content that is no longer the model's
            if stamp is None:  # not kept, or changed too lately to be stamped
                return _BYTE_FACTS[fact](data)
        return stamp[_KEY + 1 + _FACT_NAMES.index(fact)]  # type: ignore[no-any-return]

    def content_key(self, path: str) -> str | None:
        """The key of the file's content as the model read it (None: it cannot be read)."""
        return self._key(os.path.abspath(path))

    def fingerprint(self) -> str:
        """What every answer rests on: the root, the mode, each file with its content, each document with its size
        and time of change, the dependency files, and the folder paths are displayed from. Two models with one
        fingerprint answer every question alike. (A document is read only when a question needs it: reading and
        hashing diffusers' 600 took 20 ms of a warm run, their status 3 ms.)"""
        digest = blake2b(f"{self.root}\0{self.data_parallel}\0{os.getcwd()}".encode(), digest_size=16)
        for path in self.files:
            digest.update(f"\0{path}\0{self._key(path)}".encode())
        digest.update(b"\0documents")
        for path in self.documents:
            try:
                status = os.stat(path)
                stamp = f"{status.st_size}:{status.st_mtime_ns}"
            except OSError:
                stamp = "missing"
            digest.update(f"\0{path}\0{stamp}".encode())
        for path, text in self._manifests():
            digest.update(f"\0{path}\0{text}".encode())
        return digest.hexdigest()

    def _manifests(self) -> list[tuple[str, str]]:
        """The project's dependency files with their text, read once."""
        return self._memoised(("manifests",), lambda: [(p, read_manifest(p)) for p in manifests(self.root)])  # type: ignore[return-value]

    def framework_floor(self, distribution: str) -> list[int] | None:
        """The lowest version of the distribution (`pytorch-lightning`) that the project's dependency files admit;
        None when none of them sets a lower bound (it is not pinned, or not declared at all)."""

        def compute() -> list[int] | None:
            floor = declared_floor((text for _, text in self._manifests()), distribution)
            return list(floor) if floor is not None else None  # a list: an answer cached as JSON must compare equal

        return self._memoised(("framework-floor", distribution), compute)  # type: ignore[return-value]

    def summary(self, path: str) -> FileSummary | None:
        key = self._key(path)
        if key is None:
            return None
        if key in self._summaries:
            return self._summaries[key]
        summary: FileSummary | None = None
        row = self._store.get(key)
        if row is not None:
            from pitfall_lint.project.summary import FileSummary

            try:
                summary = FileSummary.from_row(row)
            except (TypeError, ValueError):
                summary = None
        if summary is None and self._wanted is not None:
            self._wanted.add(path)
            self._guesses += 1  # every answer that rests on it is forgotten after the pass
            return None
        if summary is None:
            data = self._content(path)
            assert data is not None
            summary = self._summarize(path, data)
            if summary is not None:
                self._fresh[key] = summary.to_row()
        self._summaries[key] = summary
        return summary

    def _parsed(self, path: str, data: bytes) -> FileContext | None:
        """The file's tree: the one being checked, else parsed (None: it cannot be)."""
        from pitfall_lint.context import FileContext
        from pitfall_lint.notebook import NOTEBOOK_SUFFIX, NotebookError, read_notebook
        from pitfall_lint.parsing import parse_source
        from pitfall_lint.source import SourceText

        ctx = self._trees.get(path)
        if ctx is not None:
            return ctx  # type: ignore[return-value]
        if path.endswith(NOTEBOOK_SUFFIX):
            try:
                data = read_notebook(data).text.encode("utf-8")
            except NotebookError:
                return None
        kept = self._last_parse
        if kept is not None and kept[0] == path and kept[1] == data:
            parsed = kept[2]  # parsed for another question about the file just before (its set-ups, then its summary)
        else:
            try:
                parsed = parse_source(data, path)
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                return None
        self._last_parse = (path, data, parsed)
        return FileContext(path, parsed.tree, SourceText(parsed.data), self.view(path))

    def parse(self, path: str, data: bytes) -> ParsedSource:
        """The tree of a file to check: the one its summary was made from, when a question asked before the check
        (may a rule apply here at all?) needed that summary, else parsed now; raises as parse_source does. The
        pre-commit run on Lightning's trainer.py parsed it twice."""
        from pitfall_lint.parsing import parse_source

        kept, self._last_parse = self._last_parse, None
        if kept is not None and kept[0] == os.path.abspath(path) and kept[1] == data:
            return kept[2]
        return parse_source(data, path)

    def last_parse(self, path: str) -> tuple[bytes, ParsedSource] | None:
        """The source and tree the file's summary was just made from, if it was parsed for it."""
        kept = self._last_parse
        return (kept[1], kept[2]) if kept is not None and kept[0] == path else None

    def keep_parse(self, path: str, data: bytes, parsed: ParsedSource) -> None:
        """A tree of the file made earlier (for its summary, by last_parse), for its check to use (parse)."""
        self._last_parse = (path, data, parsed)

    def shared_answers(self) -> dict[tuple, object]:
        """What prepare_shared worked out, with every answer it asked on the way, for a worker started before it."""
        return dict(self._memo)

    def adopt_shared(self, rows: dict[str, list], answers: dict[tuple, object]) -> None:
        """The summary rows that prepare_shared read (by content key, computed on the workers) and the answers it
        worked out from them in another process (shared_answers)."""
        self._store.put_all(rows)
        self._memo.update(answers)

    def _summary_or_empty(self, path: str) -> FileSummary:
        """The file's summary; an empty one where it has none (it cannot be read or parsed)."""
        from pitfall_lint.project.summary import FileSummary

        return self.summary(path) or FileSummary()

    def _summarize(self, path: str, data: bytes) -> FileSummary | None:
        from pitfall_lint.project.summary import summarize

        ctx = self._parsed(path, data)
        try:
            return summarize(ctx) if ctx is not None else None
        except RecursionError:
            return None

    def _files_naming(self, *names: str) -> list[str]:
        """The files whose source holds every one of these identifiers."""
        words = [name.encode() for name in names]
        if not all(_IDENTIFIER.fullmatch(word) for word in words):
            return []  # not an identifier (`01_train`, the stem of a script): no source can spell it
        first, *others = [self._files_spelling(word) for word in words]
        rest = [set(files) for files in others]
        return [path for path in first if all(path in files for files in rest)]

    def _files_spelling(self, word: bytes) -> list[str]:
        """The files that spell the identifier, once per word. The first few words are searched for in the files'
        bytes (a pre-commit run on one file asks a few); after them, every file's identifiers are listed once, so
        that asking for each function's callers does not read the project again each time."""
        key = ("spelling", word)
        if key in self._memo:
            return self._memo[key]  # type: ignore[return-value]
        spelled = b" " + word + b" "
        listed: list[tuple[str, bytes]] | None = self._memo.get(("identifiers",))  # type: ignore[assignment]
        if listed is None and self._scans < _SEARCHES_BEFORE_LISTING:
            self._scans += 1
            found = [
                path
                for path in self.files
                if (data := self._content(path)) is not None and word in data and spelled in b" " + data.translate(WORDS_ONLY) + b" "
            ]
        else:
            if listed is None:
                listed = self._memo[("identifiers",)] = [
                    (path, distinct_words(data))
                    for path in self.files
                    if (data := self._content(path)) is not None
                ]
            found = [path for path, identifiers in listed if spelled in identifiers]
        self._memo[key] = found
        return found

    def _files_with(self, *groups: tuple[bytes, ...]) -> list[str]:
        """The files whose bytes hold a word of every group: the only ones that can define or use what is asked."""
        key = ("files-with", groups)
        if key not in self._memo:
            self._memo[key] = [
                p for p in self.files if (data := self._content(p)) is not None and all(any(w in data for w in g) for g in groups)
            ]
        return self._memo[key]  # type: ignore[return-value]

    def _memoised(self, key: tuple, compute: Callable[[], object]) -> object:
        if key not in self._memo:
            guesses = self._guesses
            self._memo[key] = compute()
            if self._guesses != guesses:
                self._guessed.add(key)
        elif key in self._guessed:
            self._guesses += 1  # the answer read rests on a guess: so does the one that reads it
        return self._memo[key]

    def display(self, path: str) -> str:
        """As the reports print paths: relative to the working directory when inside it."""
        cwd = os.getcwd()
        return os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path

    # -- phase 2: names across files

    def resolve(self, path: str, ref: str, depth: int = 0) -> Symbol:
        """What a ref spelled in `path` names: a class or function of the project, something outside it, or unknown."""
        from pitfall_lint.project.summary import UNKNOWN

        if ref == UNKNOWN or ref.startswith("*.") or depth > _MAX_DEPTH:
            return _UNKNOWN
        summary = self.summary(path)
        if summary is None:
            return _UNKNOWN
        local = self._definition(path, ref)
        if local is not None:
            return local
        found = self._layout.resolve(path, ref)
        if found is None:
            return _UNKNOWN if ref.startswith(".") else ("external", ref)
        target, attribute = found
        if not attribute:
            return _UNKNOWN  # a module itself
        target_summary = self.summary(target)
        if target_summary is None:
            return _UNKNOWN
        definition = self._definition(target, attribute)
        if definition is not None:
            return definition
        head, _, rest = attribute.partition(".")
        reexported = dict(target_summary.imports).get(head)
        if reexported is not None:  # `from .base import EncoderBase` in a package's __init__.py
            return self.resolve(target, f"{reexported}.{rest}" if rest else reexported, depth + 1)
        return _UNKNOWN

    def _definitions(self, path: str) -> _Definitions:
        """A file's classes and functions by name, indexed once: each lookup of a name is then constant time."""

        def compute() -> _Definitions:
            summary = self._summary_or_empty(path)
            nested: dict[str, list[str]] = {}
            for cls in summary.classes:
                if "." in cls.name:
                    nested.setdefault(cls.name.rpartition(".")[2], []).append(cls.name)
            return _Definitions({c.name: c for c in summary.classes}, dict(summary.functions), nested)

        return self._memoised(("definitions", path), compute)  # type: ignore[return-value]

    def _definition(self, path: str, name: str) -> Symbol | None:
        definitions = self._definitions(path)
        if name in definitions.classes:
            return ("class", path, name)
        if name in definitions.functions:
            return ("function", path, name)
        owner, _, method = name.rpartition(".")
        if owner in definitions.classes:  # a method inherited from a base class, maybe in another file
            for base_path, base in self._class_ancestors(path, owner)[1:]:
                if f"{base}.{method}" in self._definitions(base_path).functions:
                    return ("function", base_path, f"{base}.{method}")
            return _UNKNOWN
        if "." not in name:  # a class defined inside a function: `train.Net` spelled `Net`
            nested = definitions.nested.get(name, [])
            if len(nested) == 1:
                return ("class", path, nested[0])
        return None

    def _class_facts(self, path: str, name: str):  # noqa: ANN202 - ClassFacts | None
        return self._definitions(path).classes.get(name)

    def _class_ancestors(self, path: str, name: str) -> list[tuple[str, str]]:
        """The class and its project base classes, nearest first, each once."""

        def compute() -> list[tuple[str, str]]:
            found = [(path, name)]
            for class_path, class_name in found:
                facts = self._class_facts(class_path, class_name)
                if facts is None or len(found) > 64:
                    continue
                for base in facts.bases:
                    symbol = self.resolve(class_path, base)
                    if symbol[0] == "class" and (symbol[1], symbol[2]) not in found:
                        found.append((symbol[1], symbol[2]))
            return found

        return self._memoised(("ancestors", path, name), compute)  # type: ignore[return-value]

    # -- the questions (answers are plain data)

    def is_module_class(self, path: str, name: str) -> bool:
        from pitfall_lint.analysis.modules import is_torch_module_name

        def compute() -> bool:
            for class_path, class_name in self._class_ancestors(path, name):
                facts = self._class_facts(class_path, class_name)
                if facts is not None and any(
                    is_torch_module_name(base) or is_torch_module_name(self._external_name(class_path, base)) for base in facts.bases
                ):
                    return True
            return False

        return self._memoised(("module-class", path, name), compute)  # type: ignore[return-value]

    def _may_be_module(self, path: str, name: str) -> bool:
        """False only for a class that cannot be an nn.Module: every base of it and of its project bases is a class
        of the project or a plain one of Python's (`object`, `abc.ABC`); a base the source cannot tell may be one."""

        def compute() -> bool:
            for class_path, class_name in self._class_ancestors(path, name):
                facts = self._class_facts(class_path, class_name)
                if facts is None:
                    return True
                for base in facts.bases:
                    symbol = self.resolve(class_path, base)
                    if symbol[0] != "class" and not (symbol[0] == "external" and _is_plain_python_class(symbol[1])):
                        return True
            return False

        return self._memoised(("may-be-module", path, name), compute)  # type: ignore[return-value]

    def derives_from(self, path: str, ref: str, base: str) -> bool:
        """Whether the project class that `ref` (spelled in `path`) names has `base`, a class from outside the
        project, as a base, itself or through its project bases (`class Engine(Accelerator)`)."""
        symbol = self.resolve(path, ref)
        if symbol[0] != "class":
            return False

        def compute() -> bool:
            for class_path, class_name in self._class_ancestors(symbol[1], symbol[2]):
                facts = self._class_facts(class_path, class_name)
                if facts is not None and any(self._external_name(class_path, spelled) == base for spelled in facts.bases):
                    return True
            return False

        return self._memoised(("derives-from", symbol[1], symbol[2], base), compute)  # type: ignore[return-value]

    def _external_name(self, path: str, ref: str) -> str:
        symbol = self.resolve(path, ref)
        return symbol[1] if symbol[0] == "external" else ""

    def class_methods(self, path: str, name: str) -> dict[str, str]:
        """Method kinds by name, the class's own overriding those of its bases in the project."""

        def compute() -> dict[str, str]:
            methods: dict[str, str] = {}
            for class_path, class_name in reversed(self._class_ancestors(path, name)):
                facts = self._class_facts(class_path, class_name)
                if facts is not None:
                    methods.update(dict(facts.methods))
            return methods

        return self._memoised(("methods", path, name), compute)  # type: ignore[return-value]

    def data_parallel_reach(self, path: str, name: str, wrapped_only: bool = False, told_only: bool = False) -> Evidence | None:
        """None when nn.DataParallel cannot run this class; else where it is wrapped ([] for a model library).

        `wrapped_only`: only the module DataParallel itself calls (whose outputs it gathers), the wrapped class or a
        base of it, not a submodule. `told_only`: only where a wrap of the project names the class (or the user
        chose data-parallel = "always"), not where it is assumed (a model library, a wrap of an unknown model, a
        model the library exports)."""
        chosen = self._reach("DataParallel").chosen
        for evidence in self.wrapper_reach("DataParallel", path, name):
            holder = evidence[4] if evidence else WRAPPED_UNKNOWN
            if told_only and holder == WRAPPED_UNKNOWN and not chosen:
                continue
            if wrapped_only and holder not in (WRAPPED_ITSELF, WRAPPED_UNKNOWN):
                continue
            return evidence
        return None if told_only else self._export_reach().get((path, name))

    def wrapper_reaches_file(self, kind: WrapperKind, path: str) -> bool:
        """Whether a wrap of this kind can run some class the file defines: where none can, no pitfall of the
        modules it runs can be reported there."""
        reach = self._reach(kind)
        reached = self._memoised(("reached-files", kind), lambda: {p for p, _ in reach.classes})
        if reach.everything or path in reached:  # type: ignore[operator]
            return True
        if kind != "DataParallel":
            return False
        exported = self._memoised(("exported-files",), lambda: {p for p, _ in self._export_reach()})
        return path in exported  # type: ignore[operator]

    def _wrap_at(self, path: str, line: int, column: int) -> WrapSite | None:
        return next((w for w in self._summary_or_empty(path).wraps if (w.line, w.column) == (line, column)), None)

    def wrapped_classes(self, path: str, line: int, column: int) -> list[list] | None:
        """[path, name, path as displayed, line] of each project class that the wrap call at this place of the file
        wraps; None when the source cannot tell (the model comes from a parameter, an external builder, ...)."""
        wrap = self._wrap_at(path, line, column)
        if wrap is None:
            return None
        classes = self._built_classes(path, wrap.target, 0)
        if not classes:
            return None
        facts = {c: self._class_facts(*c) for c in classes}
        return [[c[0], c[1], self.display(c[0]), f.line if f else 1] for c, f in sorted(facts.items())]

    def members(self, path: str, name: str) -> list[list[str]]:
        """[methods, reads] of the class and of its project bases: the methods they define, and the names their code
        reads on the instance (`self.temperature`); not what bases outside the project define."""

        def compute() -> list[list[str]]:
            methods: set[str] = set()
            reads: set[str] = set()
            for class_path, class_name in self._class_ancestors(path, name):
                facts = self._class_facts(class_path, class_name)
                if facts is not None:
                    methods.update(m for m, _ in facts.methods)
                    reads.update(facts.reads)
            return [sorted(methods), sorted(reads - methods)]

        return self._memoised(("members", path, name), compute)  # type: ignore[return-value]

    def compiled_wrap(self, path: str, line: int, column: int) -> Evidence | None:
        """[path, line, name] of a builder function, called by the wrap call at this place, that returns
        `torch.compile(...)`."""
        wrap = self._wrap_at(path, line, column)
        return None if wrap is None else self._compiled_by(path, wrap.target, 0)

    def _compiled_by(self, path: str, ref: str, depth: int) -> Evidence | None:
        symbol = self.resolve(path, ref)
        if symbol[0] != "function" or depth >= _MAX_DEPTH:
            return None
        summary = self.summary(symbol[1])
        if summary is None:
            return None
        for function, value in summary.returns:
            if function != symbol[2]:
                continue
            if self.resolve(symbol[1], value) == ("external", _COMPILE):
                return [self.display(symbol[1]), dict(summary.functions).get(function, 1), function]
            found = self._compiled_by(symbol[1], value, depth + 1)
            if found is not None:
                return found
        return None

    def wrapper_reach(self, kind: WrapperKind, path: str, name: str) -> list[Evidence]:
        """Every wrap of this kind that can run the class, the ones that wrap it itself first; [] when none can.

        Each is `[path, line, wrap kind, splits batch, holder, options]`: `holder` is WRAPPED_ITSELF, the class
        that holds it as a submodule, or WRAPPED_UNKNOWN; `options` are the wrap's [name, "True"|"False"|"?"]. The
        evidence `[]` stands for no place at all (a model library, or `data-parallel = "always"`)."""
        reach = self._reach(kind)
        return sorted(reach.classes.get((path, name), []), key=_closeness) + reach.everything

    # -- what a library exposes to its users, who may wrap it in nn.DataParallel whatever the library trains with

    def _is_library(self) -> bool:
        """Packaged for others to install: a setup.py or setup.cfg at the root, or a pyproject.toml that names the
        distribution ([project] or [tool.poetry])."""

        def compute() -> bool:
            for path, text in self._manifests():
                name = os.path.basename(path)
                if os.path.dirname(path) == self.root and (
                    name in ("setup.py", "setup.cfg") or (name == "pyproject.toml" and ("[project]" in text or "[tool.poetry]" in text))
                ):
                    return True
            return False

        return self._memoised(("is-library",), compute)  # type: ignore[return-value]

    def _public_packages(self) -> list[str]:
        """The `__init__.py` of each top-level package (at the root, or in `src/`) and of the packages right under
        it (`timm/models`): the names a library's users import. Deeper ones hold the parts a framework's own
        trainer runs (NeMo's `nemo/collections/asr/losses`)."""

        def compute() -> list[str]:
            files = set(self.files)
            found = []
            for path in self.files:
                parts = self._layout.relative(path).split("/")
                parts = parts[1:] if parts[0] == "src" else parts
                if parts[-1] == "__init__.py" and (
                    len(parts) == 2 or (len(parts) == 3 and os.path.join(os.path.dirname(os.path.dirname(path)), "__init__.py") in files)
                ):
                    found.append(path)
            return found

        return self._memoised(("public-packages",), compute)  # type: ignore[return-value]

    def _export_sites(self, package: str) -> list[tuple[tuple[str, str], int]]:
        """The classes a package's `__init__.py` offers by name, each with the line that does: its own public
        classes, the names it imports or lists in `__all__`, and what its star imports bring (a module's `__all__`,
        else its public classes)."""

        def compute() -> list[tuple[tuple[str, str], int]]:
            summary = self._summary_or_empty(package)
            found = [((package, c.name), c.line) for c in summary.classes if "." not in c.name and not c.name.startswith("_")]
            imports = dict(summary.imports)
            for name, line, how in summary.exports:
                if how == "star":
                    found += [(cls, line) for cls in self._star_exports(package, name)]
                elif name in imports:
                    symbol = self.resolve(package, imports[name])
                    if symbol[0] == "class":
                        found.append(((symbol[1], symbol[2]), line))
            return found

        return self._memoised(("export-sites", package), compute)  # type: ignore[return-value]

    def _star_exports(self, importer: str, module: str) -> list[tuple[str, str]]:
        """The project classes `from <module> import *` binds in `importer`."""
        target = self._layout.resolve(importer, module)
        if target is None or target[1]:
            return []
        summary = self._summary_or_empty(target[0])
        listed = [name for name, _, how in summary.exports if how == "__all__"]
        if not listed:
            return [(target[0], c.name) for c in summary.classes if "." not in c.name and not c.name.startswith("_")]
        found = []
        for name in listed:
            symbol = self.resolve(target[0], dict(summary.imports).get(name, name))
            if symbol[0] == "class":
                found.append((symbol[1], symbol[2]))
        return found

    def _export_reach(self) -> dict[tuple[str, str], Evidence]:
        """The classes a library's users may wrap in nn.DataParallel, whatever the library itself trains with: each
        model (a class that builds parameters) its public packages offer by name, with its bases and submodules;
        each with the evidence of the export, a reach whose holder the source cannot tell."""

        def compute() -> dict[tuple[str, str], Evidence]:
            from pitfall_lint.analysis.modules import EXPORTED

            found: dict[tuple[str, str], Evidence] = {}
            if self.data_parallel != "auto" or not self._is_library():
                return found
            for package in self._public_packages():
                for cls, line in self._export_sites(package):
                    # A model to wrap is a module that holds parameters it builds: not a loss, nor a searcher over
                    # modules it is given, nor a trainer (nn.DataParallel takes modules alone).
                    if cls in found or not self._may_be_module(*cls) or not self._class_holds_parameters(cls, frozenset()):
                        continue
                    evidence = [self.display(package), line, EXPORTED, False, WRAPPED_UNKNOWN, []]
                    for reached in self._reached_from(cls):
                        found.setdefault(reached, evidence)
            return found

        return self._memoised(("export-reach",), compute)  # type: ignore[return-value]

    def prepare_shared(self) -> None:
        """Answers the questions about the whole project that nearly every file of a large one asks (which module
        classes each wrapper reaches, whether the project trains distributed) before the files are spread over
        worker processes, which inherit the answers instead of each computing them again."""
        for kind in ("DataParallel", "DistributedDataParallel"):
            self._reach(kind)  # type: ignore[arg-type]
        self._export_reach()

    def summaries_wanted(self) -> tuple[list[str], list[str]]:
        """The files whose summaries prepare_shared would compute here, as far as the summaries at hand lead, and
        those it would walk for their set-ups of distributed training alone: found by answering with each of them
        taken as None or unknown, the answers that rest on such a guess then forgotten (the others hold, and serve the
        next pass: Lightning's ten passes each worked out every answer again, while the workers waited). Summarised
        and walked on every core (read_set_ups), they let the next pass reach further; none left, prepare_shared
        computes nothing."""
        self._wanted, self._walks_wanted = set(), set()
        try:
            self.prepare_shared()
        finally:
            wanted, walks = self._wanted, self._walks_wanted
            self._wanted, self._walks_wanted = None, set()
            for key in self._guessed:
                del self._memo[key]
            self._guessed = set()
        if walks:
            self._walks_ahead *= 2
        return sorted(wanted), sorted(walks - wanted)

    def read_set_ups(self, path: str) -> None:
        """Works out whether the file sets up distributed training (on a worker, for a pass that named it): the answer
        is kept by content, among the fresh summaries."""
        self._sets_up_distributed(path)

    def _reach(self, kind: WrapperKind) -> _Reach:
        return self._memoised(("reach", kind), lambda: self._compute_reach(kind))  # type: ignore[return-value]

    def shared_files(self) -> list[str]:
        """The files whose summaries `prepare_shared` reads first (those that may wrap a module), to be summarised
        beforehand on every core."""
        kinds: tuple[WrapperKind, ...] = ("DistributedDataParallel",)
        if self.data_parallel == "auto":  # else DataParallel's reach is the setting's, and reads no file
            kinds = ("DataParallel", *kinds)
        return sorted({path for kind in kinds for path in self._may_wrap(kind)})

    def _may_wrap(self, kind: WrapperKind) -> list[str]:
        fact = "may-wrap-in-data-parallel" if kind == "DataParallel" else "may-wrap-in-ddp"
        return self._memoised(("may-wrap", kind), lambda: [p for p in self.files if self._holds(p, fact)])  # type: ignore[return-value]

    def _wrap_sites(self, kind: WrapperKind) -> list[tuple[str, WrapSite]]:
        return [
            (path, wrap)
            for path in self._may_wrap(kind)
            for wrap in self._summary_or_empty(path).wraps
            if (wrap.kind not in _DISTRIBUTED_WRAPS if kind == "DataParallel" else wrap.kind == kind)
        ]

    def has_summary(self, path: str) -> bool:
        """Whether the summary of the file is at hand (computed, or cached by its content)."""
        key = self._key(path)
        return key is not None and (key in self._summaries or self._store.get(key) is not None)

    def _compute_reach(self, kind: WrapperKind) -> _Reach:
        if kind == "DataParallel" and self.data_parallel != "auto":
            return _Reach(everything=[[]], chosen=True) if self.data_parallel == "always" else _Reach()
        sites = self._wrap_sites(kind)
        if not sites and kind == "DataParallel" and not self._trains_distributed():
            # A project that trains in parallel without DataParallel never runs its modules under it; a model
            # library that trains nothing itself leaves the choice to its users, who may wrap.
            return _Reach(everything=[[]])
        # A DataParallel wrap whose model the source cannot tell reaches every module, unless the project trains
        # with DDP, FSDP or a framework: DataParallel is then an aside (an inference script, an option), and such a
        # wrap reaches only the modules its own file defines or imports.
        incidental = kind == "DataParallel" and self._trains_distributed()
        reach = _Reach()
        unknown_done: set[tuple] = set()
        for path, wrap in sites:
            def evidence(holder: str, path: str = path, wrap: WrapSite = wrap) -> Evidence:
                return [self.display(path), wrap.line, wrap.kind, wrap.splits_batch, holder, [list(o) for o in wrap.options]]

            classes = self._built_classes(path, wrap.target, 0)
            if classes is None and not incidental:
                reach.add(None, evidence(WRAPPED_UNKNOWN))
                continue
            if classes is None:
                # What the wrap holds is unknown: every class at hand is reached with that holder (once per file
                # and way of wrapping: the classes at hand are the same for every such wrap of the file).
                done = (path, *_way_of_wrapping(evidence(WRAPPED_UNKNOWN)))
                if done not in unknown_done:
                    unknown_done.add(done)
                    for cls in self._classes_at_hand(path):
                        for reached in self._reached_from(cls):
                            reach.add(reached, evidence(WRAPPED_UNKNOWN))
                continue
            for cls in classes:
                for reached, holder in self._reached_from(cls).items():
                    reach.add(reached, evidence(holder))
        return reach

    def _classes_at_hand(self, path: str) -> list[tuple[str, str]]:
        """The project classes a file defines or imports by name."""
        summary = self.summary(path)
        if summary is None:
            return []
        found = [(path, c.name) for c in summary.classes]
        for _, ref in summary.imports:
            symbol = self.resolve(path, ref)
            if symbol[0] == "class":
                found.append((symbol[1], symbol[2]))
        return found

    def _trains_distributed(self) -> bool:
        """Read file by file until one sets up distributed training: most projects that do, tell it early."""

        def compute() -> bool:
            unknown = False
            for path in self.files:
                if self._holds(path, "may-set-up-distributed"):
                    answer = self._sets_up_distributed(path)
                    if answer:
                        return True
                    if answer is None:  # a pass's guess: it sets training up, once the pass named enough to walk
                        unknown = True
                        if len(self._walks_wanted) >= self._walks_ahead:
                            return True
            return unknown

        return self._memoised(("trains-distributed",), compute)  # type: ignore[return-value]

    def _sets_up_distributed(self, path: str) -> bool | None:
        """From what an earlier run kept of this content, else from the file's summary when it is at hand or will be
        kept for the next run, else from a walk for the set-ups alone (a summary costs some three times as much, and
        a project that trains nothing in parallel has every candidate read). The answer is kept by content: a
        pre-commit run on Lightning's trainer.py summarised that file and loaded a dozen cached summaries (with the
        summaries' code) for this one fact of each, a tenth of the run. None: unknown, in a pass of summaries_wanted
        (the file is named for a walk)."""
        key = self._key(path)
        kept = self._store.get(key + SETS_UP) if key is not None else None
        if kept in ([True], [False]):  # anything else is a cache written otherwise: worked out again
            return kept[0]  # type: ignore[index,no-any-return]
        if self._wanted is not None and not self.has_summary(path):
            # While the summaries to compute on every core are gathered: unknown, a guess kept for no answer, and a
            # walk for the workers (a summary of every candidate taken as unknown had diffusers summarise hundreds,
            # where the answer reads them only until the first that sets training up).
            self._guesses += 1
            self._walks_wanted.add(path)
            return None
        # The file being checked is parsed for its check anyway: the walk for its set-ups is all it costs more.
        if self.has_summary(path) or (self._store.keeps and path != self._checked):
            summary = self.summary(path)
            answer = summary is not None and bool(summary.distributed)
        else:
            data = self._content(path)
            ctx = self._parsed(path, data) if data is not None else None
            try:
                answer = ctx is not None and sets_up_distributed(ctx)
            except RecursionError:
                answer = False
        if key is not None:
            self._fresh[key + SETS_UP] = [answer]
        return answer

    def _built_classes(self, path: str, ref: str, depth: int) -> set[tuple[str, str]] | None:
        """The project classes a call builds (through builder functions); None when the source cannot tell."""
        symbol = self.resolve(path, ref)
        if symbol[0] == "class":
            return {(symbol[1], symbol[2])}
        if symbol[0] == "external":
            return set()
        if symbol[0] != "function" or depth >= _MAX_DEPTH:
            return None
        summary = self.summary(symbol[1])
        returned = [r for f, r in summary.returns if f == symbol[2]] if summary else []
        found: set[tuple[str, str]] = set()
        for value in returned:
            built = self._built_classes(symbol[1], value, depth + 1)
            if built is None:
                return None
            found |= built
        return found

    def _reached_from(self, start: tuple[str, str]) -> dict[tuple[str, str], str]:
        """The class and its bases (their code runs in it) as wrapped themselves, then the submodules any of them
        builds, held by that class: each class reached by a wrap of `start`, with its closest holder."""

        def compute() -> dict[tuple[str, str], str]:
            seen: dict[tuple[str, str], str] = {}
            todo = [(start, WRAPPED_ITSELF)]
            while todo:
                cls, holder = todo.pop(0)
                if cls in seen:
                    continue
                for class_path, class_name in self._class_ancestors(*cls):
                    if (class_path, class_name) in seen:
                        continue
                    seen[(class_path, class_name)] = holder
                    facts = self._class_facts(class_path, class_name)
                    for ref in facts.builds if facts else ():
                        todo.extend((built, class_name) for built in self._built_classes(class_path, ref, _MAX_DEPTH - 1) or ())
            return seen

        return self._memoised(("reached-from", start), compute)  # type: ignore[return-value]

    def holds_parameters(self, path: str, ref: str) -> bool | None:
        """Whether the project class that `ref` (spelled in `path`) names builds trainable parameters, itself, in a
        base class or in a submodule; None when the ref names no class of the project."""
        symbol = self.resolve(path, ref)
        if symbol[0] != "class":
            return None
        return self._class_holds_parameters((symbol[1], symbol[2]), frozenset())

    def _class_holds_parameters(self, cls: tuple[str, str], seen: frozenset[tuple[str, str]]) -> bool:
        def compute() -> bool:
            for class_path, class_name in self._class_ancestors(*cls):
                facts = self._class_facts(class_path, class_name)
                if facts is None:
                    continue
                if facts.parameters:
                    return True
                for ref in facts.builds:
                    for built in self._built_classes(class_path, ref, _MAX_DEPTH - 1) or ():
                        if built not in seen and built != cls and self._class_holds_parameters(built, seen | {cls}):
                            return True
            return False

        if len(seen) > _MAX_DEPTH:
            return False
        return self._memoised(("holds-parameters", *cls), compute)  # type: ignore[return-value]

    def seeding_helper(self, path: str, ref: str) -> list | None:
        """How the project function that `ref` (spelled in `path`) seeds the global generators: ["per-rank"] when it
        adds the rank itself, else ["as-given", parameter, position, path, line] (the parameter it seeds them with);
        None when it names no function that seeds them."""
        from pitfall_lint.analysis.seeding import PER_RANK

        symbol = self.resolve(path, ref)
        summary = self.summary(symbol[1]) if symbol[0] == "function" else None
        found = [seeding for seeding in summary.seeders if seeding[0] == symbol[2]] if summary else []
        if not found:
            return None
        if any(how == PER_RANK for _, how, _, _ in found):
            return [PER_RANK]
        _, how, parameter, position = found[0]
        return [how, parameter, position, self.display(symbol[1]), self._definitions(symbol[1]).functions[symbol[2]]]

    def random_augmentation(self, path: str, ref: str) -> Evidence | None:
        """Where the project class or function that `ref` (spelled in `path`) names builds a transform that draws at
        random, in its own code (a class's methods and those of its project bases) or in the project code it calls a
        few calls deep: [path, line, transform]; None when it names neither or builds none."""
        symbol = self.resolve(path, ref)
        return self._random_augmentation(symbol, 0) if symbol[0] in ("class", "function") else None

    def _random_augmentation(self, definition: Symbol, depth: int) -> Evidence | None:
        from pitfall_lint.analysis.seeding import is_random_transform

        def compute() -> Evidence | None:
            kind, path, name = definition
            owners = self._class_ancestors(path, name) if kind == "class" else [(path, name)]
            for owner_path, owner in owners:
                by_caller = self._calls_by_caller(owner_path)
                sites = [site for caller in by_caller if caller == owner or caller.startswith(owner + ".") for site in by_caller[caller]]
                for site in sites:
                    if is_random_transform(site.callee):
                        return [self.display(owner_path), site.line, site.callee.rpartition(".")[2]]
                for site in sites if depth < _MAX_DEPTH else ():
                    called = self.resolve(owner_path, site.callee)
                    if called[0] in ("class", "function") and called != definition:
                        found = self._random_augmentation(called, depth + 1)
                        if found is not None:
                            return found
            return None

        return self._memoised(("random-augmentation", definition, depth), compute)  # type: ignore[return-value]

    def _calls_by_caller(self, path: str) -> dict[str, list[CallSite]]:
        """A file's call sites by the scope path of the calling function ("" at module level)."""

        def compute() -> dict[str, list[CallSite]]:
            found: dict[str, list[CallSite]] = {}
            for site in self._summary_or_empty(path).calls:
                found.setdefault(site.caller, []).append(site)
            return found

        return self._memoised(("calls-by-caller", path), compute)  # type: ignore[return-value]

    def _call_sites(self, path: str, name: str) -> list[tuple[str, CallSite]]:
        """Every call of the function `name` of `path`, in the files whose bytes hold its name."""

        def compute() -> list[tuple[str, CallSite]]:
            found = []
            owner, _, short = name.rpartition(".")
            for site_path in self._possible_callers(path, owner, short):
                for site in self._calls_by_short_name(site_path).get(short, ()):
                    if site.callee.startswith("*."):
                        matches = site_path == path
                    else:
                        matches = self.resolve(site_path, site.callee)[1:] == (path, name)
                    if matches:
                        found.append((site_path, site))
            return found

        return self._memoised(("call-sites", path, name), compute)  # type: ignore[return-value]

    def _calls_by_short_name(self, path: str) -> dict[str, list[CallSite]]:
        """A file's call sites by the last part of the callee's name: each function's callers are then a lookup."""

        def compute() -> dict[str, list[CallSite]]:
            found: dict[str, list[CallSite]] = {}
            for site in self._summary_or_empty(path).calls:
                found.setdefault(site.callee.rpartition(".")[2], []).append(site)
            return found

        return self._memoised(("calls-by-short-name", path), compute)  # type: ignore[return-value]

    def _possible_callers(self, path: str, owner: str, short: str) -> list[str]:
        """The files that can spell a call of it: its own, and those that name it and its class (a method) or
        its module (a function: they import it). A call through a subclass in another file is not followed."""
        if owner:
            named = owner.rpartition(".")[2]
        else:
            stem = os.path.splitext(os.path.basename(path))[0]
            named = os.path.basename(os.path.dirname(path)) if stem == "__init__" else stem
        candidates = self._files_naming(short, named)
        return candidates if path in candidates else [path, *candidates]

    def named_elsewhere(self, path: str, name: str, module_level: bool) -> bool:
        """Whether a file of the project other than `path` may use what `path` names so: one that spells the
        identifier (a call, an import, a mention in a string or a comment) and, for a module-level definition, the
        module too (as an import of it must: two scripts may each define their own `Config`)."""
        candidates = self._possible_callers(path, "", name) if module_level else self._files_naming(name)
        return any(other != path for other in candidates)

    def module_file(self, importer: str, dotted: str) -> str | None:
        """The project's file that an import in `importer` names (`options`, `.config`, `utils.options.parse_args`);
        None for a module outside the project."""
        found = self._layout.resolve(os.path.abspath(importer), dotted)
        return found[0] if found else None

    def module_callers(self, path: str) -> list[tuple[str, int, str]]:
        """Where the other files of the project call the module-level functions of `path`: (file, line, function)."""
        path = os.path.abspath(path)
        functions = [name for name, _ in self._summary_or_empty(path).functions if "." not in name]
        return sorted((site_path, site.line, name) for name in functions for site_path, site in self._call_sites(path, name)
                      if site_path != path)

    def has_callers(self, path: str, name: str) -> bool:
        """Whether any file of the project calls the function by a name that resolves to it."""
        return bool(self._call_sites(path, name))

    def callers_restricted(self, path: str, name: str, depth: int = 0) -> Evidence | None:
        """Where a caller is, when the function has callers and every one is restricted to one rank; else None."""

        def compute() -> Evidence | None:
            sites = self._call_sites(path, name)
            if not sites:
                return None
            for site_path, site in sites:
                if site.guarded:
                    continue
                if site.caller and depth < _MAX_DEPTH and self.callers_restricted(site_path, site.caller, depth + 1) is not None:
                    continue
                return None
            site_path, site = next(((p, s) for p, s in sites if s.guarded), sites[0])
            return [self.display(site_path), site.line]

        return self._memoised(("callers-restricted", path, name, depth), compute)  # type: ignore[return-value]

    def every_rank_caller(
        self, path: str, name: str, slots: Sequence[str] = (), branch: Sequence[Sequence] = (), depth: int = 0
    ) -> Evidence | None:
        """A call, in code that sets up distributed training, that runs the function on every rank; else None.
        `slots`: the parameter (position, name) the function writes to: a call that passes a per-rank value there
        gives every rank its own file. `branch`: [slots, truth] of each parameter the write is in a branch on (`if
        safe_serialization: ... else: torch.save(...)` is [["5", "safe_serialization"], False]): a call that passes
        a literal of the other truth never reaches the write."""
        branch = _frozen_branch(branch)

        def compute() -> Evidence | None:
            for site_path, site in self._call_sites(path, name):
                if site.guarded or (site.caller and self.callers_restricted(site_path, site.caller) is not None):
                    continue
                if any(slot in site.per_rank for slot in slots):
                    continue
                literals = dict(site.constants)
                if any(literals.get(slot, truth) != truth for parameter, truth in branch for slot in parameter):
                    continue
                summary = self.summary(site_path)
                if summary is not None and summary.distributed:
                    return [self.display(site_path), site.line]
                if site.caller and depth < _MAX_DEPTH:
                    found = self.every_rank_caller(site_path, site.caller, (), (), depth + 1)
                    if found is not None:
                        return found
            return None

        return self._memoised(("every-rank-caller", path, name, tuple(slots), branch, depth), compute)  # type: ignore[return-value]

    def runs_on_one_node(self, path: str, name: str, depth: int = 0) -> bool:
        """Whether the function runs only in process groups that span one node: its file's code or its own (or an
        enclosing function's) says so, or, where that code tells nothing, every call of it in the project is made
        where one does (up to three calls up)."""

        def compute() -> bool:
            facts = dict(self._summary_or_empty(path).one_node)
            if facts.get(""):
                return True
            parts = name.split(".")
            for end in range(len(parts), 0, -1):
                verdict = facts.get(".".join(parts[:end]))
                if verdict is not None:
                    return verdict
            if depth >= _MAX_DEPTH:
                return False
            sites = self._call_sites(path, name)
            if not sites:  # never called by name: run by the functions it is handed to, where they run
                runners = [self.resolve(site_path, site.callee) for site_path, site in self._handed_sites(path, name)]
                return bool(runners) and all(
                    runner[0] == "function" and self.runs_on_one_node(runner[1], runner[2], depth + 1) for runner in runners
                )
            return all(
                self.runs_on_one_node(site_path, site.caller, depth + 1)
                if site.caller
                else bool(dict(self._summary_or_empty(site_path).one_node).get(""))
                for site_path, site in sites
            )

        return self._memoised(("one-node", path, name, depth), compute)  # type: ignore[return-value]

    def _handed_sites(self, path: str, name: str) -> list[tuple[str, CallSite]]:
        """The calls that hand the function `name` of `path` over as an argument, in the files whose bytes hold it."""

        def compute() -> list[tuple[str, CallSite]]:
            owner, _, short = name.rpartition(".")
            return [
                (site_path, site)
                for site_path in self._possible_callers(path, owner, short)
                for site in self._summary_or_empty(site_path).calls
                if any(
                    ref.rpartition(".")[2] == short
                    and (site_path == path if ref.startswith("*.") else self.resolve(site_path, ref)[1:] == (path, name))
                    for ref in site.handed
                )
            ]

        return self._memoised(("handed-sites", path, name), compute)  # type: ignore[return-value]

    def spawn_site(self, path: str, name: str) -> Evidence | None:
        """Where `torch.multiprocessing.spawn` (or start_processes) starts this function, if anywhere: its first
        parameter is then the process index, the rank of a one-node job."""

        def compute() -> Evidence | None:
            owner, _, short = name.rpartition(".")
            spawning = set(self._files_with(_SPAWN_WORDS))
            for site_path in self._possible_callers(path, owner, short) if spawning else ():
                if site_path not in spawning:
                    continue  # every way of starting processes spells one of the words: no summary needed
                summary = self.summary(site_path)
                for ref, line in summary.spawns if summary else ():
                    if ref.rpartition(".")[2] == short and self.resolve(site_path, ref)[1:] == (path, name):
                        return [self.display(site_path), line]
            return None

        return self._memoised(("spawn-site", path, name), compute)  # type: ignore[return-value]

    def spawned_signature(self, path: str, line: int) -> list | None:
        """What the process-starting call (mp.spawn, start_processes) on this line of `path` starts: [path, *Signature]
        of a project function, None when the source cannot tell which function it is."""

        def compute() -> list | None:
            summary = self.summary(path)
            refs = {ref for ref, at in summary.spawns if at == line} if summary else set()
            if len(refs) != 1:
                return None
            symbol = self.resolve(path, refs.pop())
            target = self.summary(symbol[1]) if symbol[0] == "function" else None
            found = next((s for s in target.signatures if s.name == symbol[2]), None) if target else None
            # Lists, not tuples: a cached answer comes back from JSON and must compare equal.
            return [self.display(symbol[1]), *(list(v) if isinstance(v, tuple) else v for v in astuple(found))] if found else None

        return self._memoised(("spawned-signature", path, line), compute)  # type: ignore[return-value]

    def wrapper_checkpoint(self, name: str) -> Evidence | None:
        """Where the project saves a wrapper's state_dict (`module.` keys) to a file of this name, if it does."""
        # Such a save is `torch.save(<wrapper>.state_dict(), ...)` of a wrapper the file built: a file without the
        # words, or that never calls a wrapper, holds none.
        from pitfall_lint.analysis.wrappers import same_checkpoint

        for path in self._files_saving_wrappers():
            summary = self.summary(path)
            for saved, line in summary.wrapper_saves if summary else ():
                if same_checkpoint(saved, name):
                    return [self.display(path), line]
        return None

    def bare_checkpoint_load(self, name: str) -> Evidence | None:
        """Where the project loads a checkpoint of this file name into a model that does not hold the wrapper on
        every path (a bare model, where the `module.` keys of a wrapper's save do not fit), if it does."""
        from pitfall_lint.analysis.wrappers import same_checkpoint

        def compute() -> Evidence | None:
            literal = max(name.split("*"), key=len).encode()  # every file that can spell the name holds it
            for path in self._files_with((b"load_state_dict",), (literal,)):
                summary = self.summary(path)
                for loaded, line in summary.bare_loads if summary else ():
                    if same_checkpoint(loaded, name):
                        return [self.display(path), line]
            return None

        return self._memoised(("bare-checkpoint-load", name), compute)  # type: ignore[return-value]

    def _files_saving_wrappers(self) -> list[str]:
        def compute() -> list[str]:
            with_words = self._files_with((b"state_dict",), (b"save",))
            return [p for p in with_words if WRAPPER_CALL_OR_ALIAS.search(self._content(p))]  # type: ignore[arg-type]

        return self._memoised(("files-saving-wrappers",), compute)  # type: ignore[return-value]

    def launches(self, path: str) -> list[Evidence]:
        """[document, line, launcher, flag passed] of every launch command of this script that the project's shell
        scripts, Makefiles and documentation write (see project/launches.py)."""
        return self._launches_by_script().get(path, [])

    def _launches_by_script(self) -> dict[str, list[Evidence]]:
        def compute() -> dict[str, list[Evidence]]:
            from pitfall_lint.project.launches import read_launches  # its patterns cost start-up what few runs need

            found: dict[str, list[Evidence]] = {}
            for document in self.documents:
                data = self._content(document)
                folder = os.path.dirname(self._layout.relative(document))
                for launch in read_launches(data) if data is not None else ():
                    script = self._launched_script(folder, launch.script)
                    if script is not None:
                        found.setdefault(script, []).append([self.display(document), launch.line, launch.launcher, launch.passes])
            return found

        return self._memoised(("launches",), compute)  # type: ignore[return-value]

    def _launched_script(self, folder: str, written: str) -> str | None:
        """The project file a command in a document of `folder` (relative to the root) names as its script: the path
        as written from that folder or from one above it (a command is often run from the root), else the one file
        below that folder whose path ends in it; None when none is, or several are."""
        parts = [p for p in written.replace("\\", "/").split("/") if p not in ("", ".")]
        if written.startswith(("/", "~")):
            parts = parts[-1:]  # a path of the author's machine: its file name alone
        # What comes after a variable or a step up is relative to a folder the document does not name.
        unknown = [i for i, part in enumerate(parts) if part == ".." or "$" in part]
        tail = "/".join(parts[unknown[-1] + 1 :] if unknown else parts)
        if not tail:
            return None
        candidates = self._layout.ending_in(tail)
        while True:
            exact = self._layout.file(f"{folder}/{tail}" if folder else tail)
            if exact is not None:
                return exact
            below = [c for c in candidates if not folder or c.startswith(folder + "/")]
            if below or not folder:
                return self._layout.file(below[0]) if len(below) == 1 else None
            folder = os.path.dirname(folder)

    # -- the questions by name, for the views and for checking a cached result

    def ask(self, question: str, *arguments: object) -> object:
        return getattr(self, _QUESTIONS[question])(*arguments)

    def view(self, path: str) -> ProjectView:
        return ProjectView(self, path)

    def view_for_check(self, path: str) -> ProjectView:
        """The view of the file about to be checked, until `withdraw`: its tree, parsed for a question, serves the
        check."""
        self._checked = os.path.abspath(path)
        return self.view(path)


def _way_of_wrapping(evidence: Evidence) -> tuple:
    """What a question about a wrap can ask of it: its kind, whether it splits the batch, the holder, the options."""
    return evidence[2], evidence[3], evidence[4], repr(evidence[5])


def _closeness(evidence: Evidence) -> tuple[bool, int]:
    """Wraps of the class itself first, then those with the fewest of DDP's graph options on."""
    return evidence[4] != WRAPPED_ITSELF, sum(value != "False" for _, value in evidence[5])


_QUESTIONS = {
    "module-class": "is_module_class",
    "methods": "class_methods",
    "dp-reach": "data_parallel_reach",
    "wrapper-reaches-file": "wrapper_reaches_file",
    "wrapped-classes": "wrapped_classes",
    "members": "members",
    "compiled-wrap": "compiled_wrap",
    "wrapper-reach": "wrapper_reach",
    "holds-parameters": "holds_parameters",
    "derives-from": "derives_from",
    "callers-restricted": "callers_restricted",
    "has-callers": "has_callers",
    "named-elsewhere": "named_elsewhere",
    "every-rank-caller": "every_rank_caller",
    "wrapper-checkpoint": "wrapper_checkpoint",
    "bare-checkpoint-load": "bare_checkpoint_load",
    "launches": "launches",
    "spawn-site": "spawn_site",
    "one-node": "runs_on_one_node",
    "spawned-signature": "spawned_signature",
    "framework-floor": "framework_floor",
    "seeding-helper": "seeding_helper",
    "random-augmentation": "random_augmentation",
}

Question = tuple[str, tuple, object]  # (question, arguments, answer)


def _frozen_branch(branch: Sequence[Sequence]) -> tuple[tuple[tuple[str, ...], bool], ...]:
    """every_rank_caller's `branch` as a key: as a rule gives it, or as a cached question read back from JSON."""
    return tuple((tuple(parameter), truth) for parameter, truth in branch)


class ProjectView:
    """One file's window on the project: questions about its own definitions, each answer recorded."""

    online = True

    def __init__(self, model: ProjectModel, path: str) -> None:
        self.model = model
        self.path = os.path.abspath(path)
        self.asked: dict[tuple[str, tuple], object] = {}

    def _ask(self, question: str, *arguments: object) -> object:
        key = (question, arguments)
        if key not in self.asked:
            self.asked[key] = self.model.ask(question, *arguments)
        return self.asked[key]

    def offline(self) -> ProjectView:
        """The same file with no project around it, for its summary: phase 1 must read one file only."""
        return _OfflineView(self.model, self.path)

    def questions(self) -> tuple[Question, ...]:
        return tuple((question, arguments, answer) for (question, arguments), answer in self.asked.items())

    @property
    def target(self) -> TargetVersion | None:
        """The project's oldest Python, when known (a setting: part of the result cache's key, not a question)."""
        return self.model.target

    def is_module_class(self, cls: ast.ClassDef, ancestors: Sequence[ast.AST]) -> bool:
        return self._ask("module-class", self.path, definition_name(cls, ancestors))  # type: ignore[return-value]

    def class_methods(self, cls: ast.ClassDef, ancestors: Sequence[ast.AST]) -> dict[str, str]:
        return self._ask("methods", self.path, definition_name(cls, ancestors))  # type: ignore[return-value]

    def data_parallel_reach(
        self, cls: ast.ClassDef, ancestors: Sequence[ast.AST], wrapped_only: bool = False, told_only: bool = False
    ) -> Evidence | None:
        name = definition_name(cls, ancestors)
        return self._ask("dp-reach", self.path, name, wrapped_only, told_only)  # type: ignore[return-value]

    def wrapper_reaches_file(self, kind: WrapperKind) -> bool:
        return self._ask("wrapper-reaches-file", kind, self.path)  # type: ignore[return-value]

    def wrapped_classes(self, wrap: ast.Call) -> list[list] | None:
        """The classes that this DataParallel/DDP call of the file wraps."""
        return self._ask("wrapped-classes", self.path, wrap.lineno, wrap.col_offset)  # type: ignore[return-value]

    def members(self, path: str, name: str) -> list[list[str]]:
        """[methods, names its code reads on the instance] of a class anywhere in the project (see wrapped_classes)."""
        return self._ask("members", path, name)  # type: ignore[return-value]

    def compiled_wrap(self, wrap: ast.Call) -> Evidence | None:
        return self._ask("compiled-wrap", self.path, wrap.lineno, wrap.col_offset)  # type: ignore[return-value]

    def wrapper_reach(self, kind: WrapperKind, cls: ast.ClassDef, ancestors: Sequence[ast.AST]) -> list[Evidence]:
        return self._ask("wrapper-reach", kind, self.path, definition_name(cls, ancestors))  # type: ignore[return-value]

    def holds_parameters(self, ref: str) -> bool | None:
        """For a class this file names (`ref` as the file spells it after its imports)."""
        return self._ask("holds-parameters", self.path, ref)  # type: ignore[return-value]

    def derives_from(self, ref: str, base: str) -> bool:
        """For a class this file names (`ref` as the file spells it after its imports)."""
        return self._ask("derives-from", self.path, ref, base)  # type: ignore[return-value]

    def callers_restricted(self, function: Definition, ancestors: Sequence[ast.AST]) -> Evidence | None:
        return self._ask("callers-restricted", self.path, definition_name(function, ancestors))  # type: ignore[return-value]

    def has_callers(self, function: Definition, ancestors: Sequence[ast.AST]) -> bool:
        return self._ask("has-callers", self.path, definition_name(function, ancestors))  # type: ignore[return-value]

    def named_elsewhere(self, name: str, module_level: bool) -> bool:
        """Whether another file of the project may use what this one names so."""
        return self._ask("named-elsewhere", self.path, name, module_level)  # type: ignore[return-value]

    @property
    def relative_path(self) -> str:
        """The file's path from the project's root."""
        return os.path.relpath(self.path, self.model.root)

    def every_rank_caller(
        self, function: Definition, ancestors: Sequence[ast.AST], slots: Sequence[str] = (), branch: Sequence[Sequence] = ()
    ) -> Evidence | None:
        name = definition_name(function, ancestors)
        return self._ask("every-rank-caller", self.path, name, tuple(slots), _frozen_branch(branch))  # type: ignore[return-value]

    def wrapper_checkpoint(self, name: str) -> Evidence | None:
        return self._ask("wrapper-checkpoint", name)  # type: ignore[return-value]

    def bare_checkpoint_load(self, name: str) -> Evidence | None:
        return self._ask("bare-checkpoint-load", name)  # type: ignore[return-value]

    def spawn_site(self, function: Definition, ancestors: Sequence[ast.AST]) -> Evidence | None:
        return self._ask("spawn-site", self.path, definition_name(function, ancestors))  # type: ignore[return-value]

    def runs_on_one_node(self, function: Definition, ancestors: Sequence[ast.AST]) -> bool:
        return self._ask("one-node", self.path, definition_name(function, ancestors))  # type: ignore[return-value]

    def spawned_signature(self, call: ast.Call) -> list | None:
        return self._ask("spawned-signature", self.path, call.lineno)  # type: ignore[return-value]

    def launches(self) -> list[Evidence]:
        """How the project's shell scripts and documentation launch this file: [document, line, launcher, flag]."""
        return self._ask("launches", self.path)  # type: ignore[return-value]

    def framework_floor(self, distribution: str) -> list[int] | None:
        """The lowest version of a framework the project's dependency files admit, None when unknown."""
        return self._ask("framework-floor", distribution)  # type: ignore[return-value]

    def seeding_helper(self, ref: str) -> list | None:
        """For a function this file calls (`ref` as the file spells it after its imports): see ProjectModel's."""
        return self._ask("seeding-helper", self.path, ref)  # type: ignore[return-value]

    def random_augmentation(self, ref: str) -> Evidence | None:
        """For a class or function this file calls (`ref` as the file spells it after its imports)."""
        return self._ask("random-augmentation", self.path, ref)  # type: ignore[return-value]


Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class _OfflineView(ProjectView):
    """Answers every question as a file alone would, without asking the project."""

    online = False
    _ALONE: dict[str, object] = {
        "module-class": False, "methods": {}, "has-callers": False, "named-elsewhere": True, "one-node": False,
        "launches": [], "derives-from": False,
    }

    def _ask(self, question: str, *arguments: object) -> object:
        return self._ALONE.get(question)


def still_answered(model: ProjectModel, questions: Sequence[Sequence]) -> bool:
    """Whether the project still gives every recorded answer (a cached result is then still right)."""
    return all(model.ask(question, *arguments) == answer for question, arguments, answer in questions)
