"""Files spread over the cores: each worker process owns one Engine and checks a share of the files, each file
against its own project (the files of several projects share one pool).

One pool serves a whole run. The summaries that the projects' shared answers read (which module classes each wrapper
reaches), and the walks of the files that may set up distributed training, are computed on the workers first, round
after round, while the parent works out from them which files the next round needs and, at the end, the answers. Each worker then takes the rows computed on all of them and the
parent's answers, and checks the files whose trees it parsed for their summaries, before the other files are spread
over the workers. (A second pool started for the checks, and a second parse of the files summarised, were some 3 %
of a check of Lightning. Parsing other files ahead while the parent works out a round was slower: on two cores, the
parent's work is what the next round waits for.) The parent watches the workers while it waits: where one ends before
its results come (the kernel kills a process when memory runs out), the run ends with WorkerDied within a second, where
multiprocessing's pool would wait for ever."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from pitfall_lint.engine import Engine, FileResult
from pitfall_lint.interrupts import ctrl_c_held_back
from pitfall_lint.project.model import ProjectModel
from pitfall_lint.project.store import SummaryStore
from pitfall_lint.rules.registry import RuleSpec

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext
    from multiprocessing.pool import IMapIterator, Pool
    from multiprocessing.process import BaseProcess
    from multiprocessing.synchronize import Semaphore

    from pitfall_lint.parsing import ParsedSource

# Below this many files, starting workers costs more than it saves.
_MIN_FILES_PER_WORKER = 24
# The source a worker keeps parsed from a file's summary to its check: a tree takes some 25 times its source.
_KEPT_SOURCE = 2 << 20
# How long the workers wait for each other to take their copies of the shared answers (one copy each); past it, they
# go on, and a worker that got no copy works out what it needs itself.
_SHARING_WAIT_S = 30.0
# How often a wait for the workers' results looks whether one of them ended.
_WATCH_S = 1.0
# The project of each file; a file without one is a project of its own.
Projects = Mapping[str, ProjectModel]
_Kept = tuple[str, bytes, "ParsedSource"]  # absolute path, source, tree
_T = TypeVar("_T")


class WorkerDied(Exception):
    """A worker ended while it held files (the kernel kills a process when memory runs out): multiprocessing's pool
    starts another in its place, but waits for the lost results for ever."""

    def __init__(self, exitcode: int) -> None:
        if exitcode < 0:
            name = signal.Signals(-exitcode).name if -exitcode in signal.valid_signals() else f"signal {-exitcode}"
            how = f"killed by {name}" + (", as the kernel kills a process when memory runs out" if name == "SIGKILL" else "")
        else:
            how = f"exit code {exitcode}"
        super().__init__(f"a worker process ended while checking files ({how}); its files have no result, so the run stops")


class _Rendezvous:
    """Hands each worker one copy of the shared answers: a worker that took its copy waits until the parent has
    seen every worker take one, so that none takes two. (multiprocessing's Barrier imports ctypes for its counter.)"""

    def __init__(self, context: BaseContext) -> None:
        self._taken: Semaphore = context.Semaphore(0)
        self._released: Semaphore = context.Semaphore(0)

    def wait_for_the_others(self) -> None:
        """In a worker, once it took its copy."""
        self._taken.release()
        self._released.acquire(timeout=_SHARING_WAIT_S)

    def release_once_all_took(self, workers: int, watch: Callable[[], None]) -> None:
        """In the parent; `watch` is called each _WATCH_S of the wait (it raises where a worker ended)."""
        deadline = time.monotonic() + _SHARING_WAIT_S
        taken = 0
        while taken < workers and (left := deadline - time.monotonic()) > 0:
            if self._taken.acquire(timeout=min(_WATCH_S, left)):
                taken += 1
            else:
                watch()
        for _ in range(workers):
            self._released.release()


@dataclass
class _Worker:
    engine: Engine
    projects: Projects  # the project each file is checked against, by path as given
    owners: Projects  # a project of each file to summarise (any serves: a summary is of the file alone), by absolute path
    shared: tuple[ProjectModel, ...]  # the projects whose shared answers each worker adopts before its checks
    rendezvous: _Rendezvous | None
    kept: dict[str, _Kept] = field(default_factory=dict)  # by path as given: the trees of files to check here
    kept_source: int = 0

    def keep(self, checked_as: str, path: str, parse: tuple[bytes, ParsedSource] | None) -> bool:
        """Whether the file's source and tree are kept for its check here (while the worker's share allows)."""
        if parse is None or self.kept_source + len(parse[0]) > _KEPT_SOURCE:
            return False
        self.kept[checked_as] = (path, *parse)
        self.kept_source += len(parse[0])
        return True


_worker: _Worker | None = None


def _start_worker(
    rules: Sequence[RuleSpec],
    projects: Projects,
    owners: Projects | None = None,
    shared: tuple[ProjectModel, ...] = (),
    rendezvous: _Rendezvous | None = None,
) -> None:
    """The parent answers Ctrl-C and SIGTERM (it stops the pool); a worker inheriting `verify`'s SIGTERM handler
    printed a KeyboardInterrupt traceback when the pool ended it. SIGINT comes blocked from the parent, which
    holds Ctrl-C back while it starts the workers: once ignored here, one that waited is dropped."""
    global _worker
    gc.freeze()  # what the parent built (the project model) is never garbage here: no collection reads it again
    if shared:
        # The trees kept for the checks outlive the rounds: a collection would read them all, for no garbage (but
        # the little of the summaries, kept with them when the answers are adopted).
        gc.disable()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker = _Worker(Engine(rules), projects, owners or {}, shared, rendezvous)


def _summarize_in_worker(task: tuple[str, str | None, bool]) -> tuple[dict[str, list], bool]:
    """The file's summary rows (or, for a walk, whether it sets up distributed training), and whether the tree they
    were made from is kept for the file's check here (when it is to be checked: `checked_as`, its path as given)."""
    assert _worker is not None
    path, checked_as, walk = task
    project = _worker.owners[path]
    if walk:
        project.read_set_ups(path)
    else:
        project.summary(path)
    kept = checked_as is not None and _worker.keep(checked_as, path, project.last_parse(path))
    return project.take_fresh_summaries(), kept


def _share_in_worker(pickled: bytes) -> list[FileResult]:
    """Taken once by each worker (it waits until every worker holds a copy): the summaries computed on all of them
    and the shared answers the parent worked out from them, for each shared project (pickled once by the parent for
    every worker); then the checks of the files whose trees this worker holds."""
    assert _worker is not None
    if _worker.rendezvous is not None:
        _worker.rendezvous.wait_for_the_others()
    import pickle  # here, as where the parent pickled them: multiprocessing imported it already

    rows, answers = pickle.loads(pickled)
    for model, answered in zip(_worker.shared, answers):
        model.adopt_shared(rows, answered)
    gc.freeze()  # the adopted answers and the kept trees live as long as the worker
    gc.enable()
    return [_check_in_worker(path) for path in list(_worker.kept)]


def _check_many_in_worker(paths: list[str]) -> list[FileResult]:
    return [_check_in_worker(path) for path in paths]


def _check_in_worker(path: str) -> FileResult:
    assert _worker is not None
    project = _worker.projects.get(path)
    kept = _worker.kept.pop(path, None)
    if kept is not None and project is not None:
        project.keep_parse(*kept)
    return _worker.engine.check_file(path, project)


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(files: int, jobs: int) -> int:
    """How many workers check this many files (below 2: the files are checked in this process)."""
    return min(jobs, files // _MIN_FILES_PER_WORKER)


def _chunks(paths: Sequence[str], workers: int) -> list[list[str]]:
    """Small chunks keep every worker busy to the end, whatever the sizes of the files."""
    size = 8 if len(paths) > 16 * workers else 1
    return [list(paths[start : start + size]) for start in range(0, len(paths), size)]


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _first_summaries(models: Sequence[ProjectModel]) -> list[str]:
    """The files whose summaries the shared answers of these projects read first, where none is at hand: those that
    may wrap a module."""
    return sorted({path for model in models for path in model.shared_files() if not model.has_summary(path)})


class _WorkerPool:
    def __init__(
        self, pool: Pool, processes: Sequence[BaseProcess], shared: Sequence[ProjectModel], rendezvous: _Rendezvous | None
    ) -> None:
        self._pool = pool
        self._processes = processes  # the workers as started, watched while the parent waits for results
        self._workers = len(processes)
        self._shared = shared
        self._rendezvous = rendezvous
        self._rows: dict[str, list] = {}  # every row computed on the workers, for each of them to take
        self._kept: set[str] = set()  # the files to check whose trees a worker holds, by path as given

    def _waited(self, get: Callable[[float], _T]) -> _T:
        """What `get` returns, asked again each _WATCH_S; WorkerDied where a worker ended, not a wait for ever."""
        from multiprocessing import TimeoutError

        while True:
            try:
                return get(_WATCH_S)
            except TimeoutError:
                self._raise_if_one_ended()

    def _raise_if_one_ended(self) -> None:
        for process in self._processes:
            if process.exitcode is not None:
                raise WorkerDied(process.exitcode) from None

    def _watched(self, results: IMapIterator) -> Iterator:
        """The results as they come (see _waited)."""
        while True:
            try:
                yield self._waited(results.next)
            except StopIteration:
                return

    def _checked(self, paths: Sequence[str]) -> Iterator[FileResult]:
        """The files' results in their order, checked in chunks anywhere (imap's own chunks cannot be watched)."""
        for results in self._watched(self._pool.imap(_check_many_in_worker, _chunks(paths, self._workers))):
            yield from results

    def share(self, first: Sequence[str], checked: Sequence[str], store: SummaryStore) -> None:
        """The answers that every file of the shared projects asks, worked out once, from summaries computed on every
        core round after round: `first` (see _first_summaries), then the files that the answers worked out with the
        rows at hand (kept in `store`) name, for a summary or a walk of their set-ups, until they name none that was
        not sent before (a file that cannot be parsed has no summary, and is named again). A file of `checked` (paths
        as given) keeps the tree it was parsed into on its worker, for its check there."""
        models = self._shared
        checked_as = {os.path.abspath(path): path for path in checked}
        sent: set[tuple[str, bool]] = set()  # (path, walk)

        def wanted() -> list[tuple[str, bool]]:
            summaries, walks = set(), set()
            for model in models:
                more, walked = model.summaries_wanted()
                summaries.update(more)
                walks.update(walked)
            found = {(path, False) for path in summaries} | {(path, True) for path in walks - summaries}
            return sorted(found - sent)

        paths = [(path, False) for path in first] or wanted()
        while paths:
            sent.update(paths)
            tasks = [(path, checked_as.get(path), walk) for path, walk in sorted(paths, key=lambda p: _size(p[0]), reverse=True)]  # no long wait at its end
            for (_, given, _), (rows, kept) in zip(tasks, self._watched(self._pool.imap(_summarize_in_worker, tasks))):
                self._rows.update(rows)
                store.put_all(rows)
                if kept and given is not None:
                    self._kept.add(given)
            paths = wanted()
        for model in models:
            model.prepare_shared()  # what the rounds left: the summaries of no file (it cannot be parsed)
            fresh = model.take_fresh_summaries()
            self._rows.update(fresh)
            store.put_all(fresh)

    def check(self, paths: Sequence[str]) -> Iterator[FileResult]:
        """Each file's result (in the order of `paths` where no summaries were computed first)."""
        shares = []
        if self._shared:
            import pickle  # multiprocessing imported it already; a run without workers never needs it

            pickled = pickle.dumps((self._rows, [model.shared_answers() for model in self._shared]), pickle.HIGHEST_PROTOCOL)
            shares = [self._pool.apply_async(_share_in_worker, (pickled,)) for _ in range(self._workers)]
            assert self._rendezvous is not None
            self._rendezvous.release_once_all_took(self._workers, self._raise_if_one_ended)
        rest = [path for path in paths if path not in self._kept]
        yield from self._checked(rest)
        done: set[str] = set()
        for share in shares:
            for result in self._waited(share.get):
                done.add(result.path)
                yield result
        # Kept by a worker that took no copy of the shared answers (the wait ran past its limit): checked now, anywhere.
        missed = [path for path in paths if path in self._kept and path not in done]
        yield from self._checked(missed)


@contextlib.contextmanager
def _pool(workers: int, rules: Sequence[RuleSpec], projects: Projects, shared: Sequence[ProjectModel] = ()) -> Iterator[_WorkerPool]:
    import multiprocessing  # here: a run that checks few files never pays for the import

    for rule in rules:  # its module imported once, here, for every forked worker: not once in each
        rule.load()
    if shared:
        import pitfall_lint.project.summary  # noqa: F401 - as the rules: the workers summarise, the parent reads the rows
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    owners = {path: model for model in shared for path in model.files}
    rendezvous = _Rendezvous(context) if shared else None
    with contextlib.ExitStack() as stack:  # the pool is stopped (its workers killed) whatever ends the run
        # Ctrl-C waits while the workers start: the terminal sends it to every process of the group, and a worker
        # it reached before it could ignore it printed a KeyboardInterrupt traceback.
        running = set(multiprocessing.active_children())
        with ctrl_c_held_back():
            started = stack.enter_context(
                context.Pool(workers, initializer=_start_worker, initargs=(tuple(rules), projects, owners, tuple(shared), rendezvous))
            )
        processes = [process for process in multiprocessing.active_children() if process not in running]
        yield _WorkerPool(started, processes, shared, rendezvous)


def check_files(
    paths: Sequence[str],
    rules: Sequence[RuleSpec],
    jobs: int,
    projects: Projects | None = None,
    shared: Sequence[ProjectModel] = (),
    store: SummaryStore | None = None,
) -> Iterator[FileResult]:
    """Each file's result, in the order of `paths` where no summaries are computed first. With several workers,
    the summaries that the `shared` projects' answers read are computed on them first (kept in `store`, by
    content key), and every worker adopts those answers before it checks a file."""
    projects = projects or {}
    workers = worker_count(len(paths), jobs)
    if workers < 2:
        engine = Engine(rules)
        for path in paths:
            yield engine.check_file(path, projects.get(path))
        return
    shared = shared if store is not None else ()
    first = _first_summaries(shared)  # before the workers start: they inherit what it read
    with _pool(workers, rules, projects, shared) as workers_pool:
        if shared and store is not None:
            workers_pool.share(first, paths, store)
        yield from workers_pool.check(paths)
