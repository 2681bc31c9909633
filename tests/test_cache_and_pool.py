"""The result cache and the worker pool change how fast results come, never what they are."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint import pool
from pitfall_lint.cache import FOLDER
from pitfall_lint.cli import main
from pitfall_lint.engine import Engine
from pitfall_lint.project.model import ProjectModel
from pitfall_lint.rules import all_rules

from marks import REPO

SAVE = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\n"


def check(*args: str) -> list[tuple[str, str, int]]:
    result = CliRunner().invoke(main, ["check", "--preview", "--format", "json", *args], catch_exceptions=False)
    return [(d["path"], d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"]]


def result_shards(project: Path) -> list[Path]:
    return sorted((project / FOLDER).glob("results-*.json"))


def configurations(project: Path) -> set[str]:
    """The configurations results are cached for: `results-<key>-<shard>.json`."""
    return {shard.name.rsplit("-", 1)[0] for shard in result_shards(project)}


def shard_of(project: Path, path: str) -> Path:
    """The shard of the results that holds the file's."""
    (shard,) = [shard for shard in result_shards(project) if path in json.loads(shard.read_text())]
    return shard


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "save.py").write_text(SAVE)
    (tmp_path / "clean.py").write_text("import torch.nn as nn\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_warm_run_reuses_results_and_edits_invalidate_them(project: Path) -> None:
    assert check() == [("save.py", "PFL201", 4)]
    assert len(configurations(project)) == 1
    assert (project / FOLDER / ".gitignore").read_text().splitlines()[-1] == "*"
    assert {path for shard in result_shards(project) for path in json.loads(shard.read_text())} == {"save.py", "clean.py"}
    # The cache really is read: a forged entry for unchanged content is what comes back.
    shard = shard_of(project, "save.py")
    stored = json.loads(shard.read_text())
    stored["save.py"][1][0][1] = 99
    shard.write_text(json.dumps(stored))
    assert check() == [("save.py", "PFL201", 99)]
    # An edit changes the content key, so the file is checked afresh.
    (project / "save.py").write_text("\n" + SAVE)
    assert check() == [("save.py", "PFL201", 5)]


def test_one_changed_file_rewrites_one_shard_of_the_results(project: Path) -> None:
    """A pre-commit run reads and writes the shard of its file, not the results of the whole project."""
    for index in range(40):
        (project / f"module_{index}.py").write_text(f"import torch\nx = {index}\n")
    assert check() == [("save.py", "PFL201", 4)]
    before = {shard.name: shard.read_bytes() for shard in result_shards(project)}
    assert len(before) > 8  # 42 files, 16 shards
    (project / "save.py").write_text("\n" + SAVE)
    assert check("save.py") == [("save.py", "PFL201", 5)]
    after = {shard.name: shard.read_bytes() for shard in result_shards(project)}
    assert [name for name in after if after[name] != before.get(name)] == [shard_of(project, "save.py").name]


def test_other_rules_other_cache_and_no_cache_touches_nothing(project: Path) -> None:
    assert check("--select", "PFL3") == []
    assert check() == [("save.py", "PFL201", 4)]
    assert len(configurations(project)) == 2
    other = project / "other"
    other.mkdir()
    (other / "save.py").write_text(SAVE)
    before = {shard: shard.read_bytes() for shard in result_shards(project)}
    assert check("--no-cache", str(other)) == [("other/save.py", "PFL201", 4)]
    assert {shard: shard.read_bytes() for shard in result_shards(project)} == before


def test_corrupt_cache_is_ignored(project: Path) -> None:
    check()
    for shard in result_shards(project):
        shard.write_text("{not json")
    assert check() == [("save.py", "PFL201", 4)]


def test_pool_gives_the_sequential_results_in_order(tmp_path: Path) -> None:
    sources = sorted((REPO / "fixtures").glob("PFL*/*.py")) + sorted((REPO / "tests" / "verify_cases").glob("*.py"))
    paths = []
    for copy in range(8):
        for source in sources:
            target = tmp_path / f"{copy}_{source.parent.name}_{source.name}"
            target.write_bytes(source.read_bytes())
            paths.append(str(target))
    engine = Engine(all_rules())
    sequential = [engine.check_file(path) for path in paths]
    parallel = list(pool.check_files(paths, all_rules(), jobs=2))
    assert len(paths) >= 2 * 24  # enough files for two workers
    assert parallel == sequential
    assert sum(len(r.diagnostics) for r in parallel) > 0


def test_a_worker_leaves_ctrl_c_and_sigterm_to_the_parent() -> None:
    """verify answers SIGTERM by raising KeyboardInterrupt; a worker that inherited that handler printed a traceback
    whenever the pool ended it (seen on one run in three)."""
    probe = (
        "import signal; from pitfall_lint import pool\n"
        "signal.signal(signal.SIGTERM, lambda *_: None)\n"
        "pool._start_worker((), {})\n"
        "print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    )
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    assert completed.stdout.split() == ["True", "True"]


def test_rows_of_another_format_are_checked_afresh(project: Path) -> None:
    check()
    cache_file = shard_of(project, "save.py")
    stored = json.loads(cache_file.read_text())
    assert stored["save.py"][1][0][-2] == [["guard", "dist.get_rank() == 0"], ["import", ""]]  # the fix plan survives
    stored["save.py"][1][0] = stored["save.py"][1][0][:-3]  # a malformed row: three fields short
    cache_file.write_text(json.dumps(stored))
    assert check() == [("save.py", "PFL201", 4)]


def test_an_unchanged_project_asks_no_question_again_and_a_change_asks_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each cached result keeps the fingerprint of the project it holds for: a warm run of an unchanged project
    reuses it as it is; any change in the project asks its questions again, and a changed answer is seen."""
    import shutil

    from pitfall_lint import checking

    shutil.copytree(REPO / "fixtures" / "projects" / "guard-in-caller" / "clean", tmp_path / "clean")
    monkeypatch.chdir(tmp_path / "clean")
    assert check() == []
    asked: list[object] = []

    def counting(model: object, questions: object) -> bool:
        asked.append(questions)
        return checking_still_answered(model, questions)  # type: ignore[arg-type]

    checking_still_answered = checking.still_answered
    monkeypatch.setattr(checking, "still_answered", counting)
    assert check() == []
    assert asked == []
    train = Path("train.py")
    train.write_text(train.read_text() + "# an edit that changes no answer\n")
    assert check() == []
    # The two unchanged files' results, re-validated by asking again: utils/__init__.py asked nothing, utils/io.py
    # whether every caller of save_weights is rank-guarded.
    assert sorted(len(questions) for questions in asked) == [0, 2]  # type: ignore[arg-type]
    asked.clear()
    assert check() == []
    assert asked == []  # re-validated results hold for the new fingerprint
    train.write_text(train.read_text().replace("        if RANK in {-1, 0}:\n            save_weights", "        save_weights"))
    assert check() == [("utils/io.py", "PFL201", 11)]


def test_one_changed_file_checked_alone_reads_no_fingerprint_and_is_asked_again_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pre-commit case: the file's result is stored as holding for no known state of the project."""
    import shutil

    from pitfall_lint import checking
    from pitfall_lint.project.model import ProjectModel

    shutil.copytree(REPO / "fixtures" / "projects" / "guard-in-caller" / "bad", tmp_path / "bad")
    monkeypatch.chdir(tmp_path / "bad")
    assert check() == [("utils/io.py", "PFL201", 11)]
    io = Path("utils/io.py")
    io.write_text(io.read_text() + "# edited\n")
    with monkeypatch.context() as patched:
        patched.setattr(ProjectModel, "fingerprint", lambda self: pytest.fail("fingerprint read for one file"))
        assert check("utils/io.py") == [("utils/io.py", "PFL201", 11)]
    asked: list[object] = []
    real = checking.still_answered
    monkeypatch.setattr(checking, "still_answered", lambda model, questions: asked.append(questions) or real(model, questions))
    assert check() == [("utils/io.py", "PFL201", 11)]
    assert len(asked) == 3  # utils/io.py, asked again once; train.py and utils/__init__.py, after the edit
    asked.clear()
    assert check() == [("utils/io.py", "PFL201", 11)]
    assert asked == []


def test_a_file_left_unparsed_by_the_project_is_checked_again_when_the_project_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only DataParallel rules could report in broken.py (a module class, a lambda), and nothing in a project that
    trains with DDP alone can run it under DataParallel: not parsed, so its syntax error is not reported (like a file
    without any rule's words). Once a wrap of an unknown model can run every module, it is parsed, cache or not."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "broken.py").write_text("import torch\nclass M(torch.nn.Module)\n    f = lambda: 0\n")
    train = tmp_path / "train.py"
    train.write_text(
        "import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "dist.init_process_group('gloo')\nmodel = DDP(build())\n"
    )
    monkeypatch.chdir(tmp_path)
    assert check() == [] and check("broken.py") == []
    assert json.loads(shard_of(tmp_path, "broken.py").read_text())["broken.py"][2] == [["wrapper-reaches-file", ["DataParallel", str(tmp_path / "broken.py")], False]]
    train.write_text("import torch\nmodel = torch.nn.DataParallel(build())\n")
    assert check("broken.py") == [("broken.py", "PFL000", 2)]
    assert check("--no-cache") == [("broken.py", "PFL000", 2)]


def test_one_changed_file_reads_no_other_file_of_a_warm_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pre-commit case: what the project model knows of the unchanged files (their content keys, whether they
    can wrap a module) comes from their stamps, not from their bytes; a file changed since its stamp is read again."""
    import builtins
    import os
    import time

    model = tmp_path / "model.py"
    model.write_text(
        "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self) -> None:\n        super().__init__()\n"
        "        self.lin = nn.Linear(8, 8)\n        self.seen = 0\n\n    def forward(self, x):\n        self.seen += 1\n"
        "        return self.lin(x)\n"
    )
    train = tmp_path / "train.py"
    train.write_text("import torch.nn as nn\nfrom model import Net\n\nmodel = nn.DataParallel(Net())\n")
    (tmp_path / "other.py").write_text("x = 1\n")
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.chdir(tmp_path)

    def age(path: Path, seconds: int) -> None:  # a stamp is kept only for a file changed more than two seconds ago
        os.utime(path, (time.time() - seconds, time.time() - seconds))

    for path in tmp_path.glob("*.py"):
        age(path, 60)
    assert check() == [("model.py", "PFL104", 11)]
    model.write_text(model.read_text() + "# edited\n")
    age(model, 30)
    opened: list[str] = []
    real_open = builtins.open

    def recording(file: object, *args: object, **kwargs: object) -> object:
        if str(file).endswith(".py"):
            opened.append(os.path.relpath(str(file), tmp_path))
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(builtins, "open", recording)
    assert check("model.py") == [("model.py", "PFL104", 11)]
    assert sorted(set(opened)) == ["model.py"]  # the file checked, and no other
    opened.clear()
    train.write_text("import torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
                     "from model import Net\n\ndist.init_process_group('gloo')\nmodel = DDP(Net())\n")
    age(train, 20)
    assert check("model.py") == []
    assert sorted(set(opened)) == ["model.py", "train.py"]

def test_one_changed_file_writes_the_shard_of_its_summary_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The summaries are kept in shards by the first two digits of their content key: a run that summarises one
    changed file writes that shard, not the summaries of the whole project."""
    from pitfall_lint.project import store

    (tmp_path / "pyproject.toml").write_text("")
    for index in range(40):  # enough classes that their summaries fill many shards
        (tmp_path / f"net{index}.py").write_text(f"import torch.nn as nn\n\n\nclass Net{index}(nn.Module):\n    pass\n")
    model = tmp_path / "model.py"
    model.write_text(
        "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self) -> None:\n        super().__init__()\n"
        "        self.lin = nn.Linear(8, 8)\n        self.seen = 0\n\n    def forward(self, x):\n        self.seen += 1\n"
        "        return self.lin(x)\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch.nn as nn\nfrom model import Net\n" + "".join(f"from net{i} import Net{i}\n" for i in range(40))
        + "\nmodel = nn.DataParallel(Net())\n" + "".join(f"other{i} = nn.DataParallel(Net{i}())\n" for i in range(40))
    )
    monkeypatch.chdir(tmp_path)
    assert check() == [("model.py", "PFL104", 11)]
    assert len(list((tmp_path / FOLDER).glob("summaries-*.json"))) > 10
    model.write_text(model.read_text() + "# edited\n")
    written: list[str] = []
    real_write = store.write_json_atomically
    monkeypatch.setattr(store, "write_json_atomically", lambda folder, name, document: written.append(name) or real_write(folder, name, document))
    assert check("model.py") == [("model.py", "PFL104", 11)]
    shard = store.content_key(model.read_bytes())[:2]
    assert [name.rpartition("-")[2] for name in written if name.startswith("summaries-")] == [f"{shard}.json"]


# A module whose forward is bound when it is built: PFL101 at line 7, where the project may wrap it in DataParallel.
BOUND_NET = (
    "import torch\n\n\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.forward = self.other\n\n    def other(self, x):\n        return x\n"
)


def test_whether_a_file_sets_up_distributed_training_follows_its_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The answer is kept by content: once train.py no longer sets up DDP, the project may wrap Net in DataParallel,
    and the bound forward is reported, on a warm cache as on a cold run."""
    (tmp_path / "pyproject.toml").write_text("")
    train = tmp_path / "train.py"
    train.write_text("import torch.distributed as dist\nfrom model import Net\n\ndist.init_process_group('gloo')\nnet = Net()\n")
    (tmp_path / "model.py").write_text(BOUND_NET)
    monkeypatch.chdir(tmp_path)
    assert check() == check("--no-cache") == []
    train.write_text("import torch.distributed as dist  # no set-up now\nfrom model import Net\n\nnet = Net()\n")
    assert check("model.py") == check("--no-cache", "model.py") == [("model.py", "PFL101", 7)]


def test_a_kept_set_up_answer_the_cache_holds_otherwise_is_worked_out_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `:sets-up` row of another shape (a cache edited or written by hand) is no answer: no traceback, and the same
    findings as a cold run."""
    from pitfall_lint.project.store import SETS_UP, content_key

    (tmp_path / "pyproject.toml").write_text("")
    train = tmp_path / "train.py"
    train.write_text("import torch.distributed as dist  # no ddp set-up here\nfrom model import Net\n\nnet = Net()\n")
    (tmp_path / "model.py").write_text(BOUND_NET)
    monkeypatch.chdir(tmp_path)
    assert check() == [("model.py", "PFL101", 7)]
    key = content_key(train.read_bytes()) + SETS_UP
    (shard,) = [p for p in (tmp_path / FOLDER).glob(f"summaries-*-{key[:2]}.json") if key in json.loads(p.read_text())]
    rows = json.loads(shard.read_text())
    rows[key] = ["yes"]
    shard.write_text(json.dumps(rows))
    (tmp_path / "model.py").write_text((tmp_path / "model.py").read_text() + "# edited\n")
    assert check("model.py") == check("--no-cache", "model.py") == [("model.py", "PFL101", 7)]


def test_a_project_moved_with_its_cache_is_checked_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The questions a result rests on name the project's files by where they lay: in a copy of the project (a CI
    # cache restored into another folder) they would be asked about files that are not there, and answered wrongly.
    first = tmp_path / "first"
    first.mkdir()
    (first / "pyproject.toml").write_text("")
    (first / "train.py").write_text(
        "import argparse\nimport os\nparser = argparse.ArgumentParser()\n"
        'parser.add_argument("--local_rank", type=int, default=0)\nargs = parser.parse_args()\n'
        'local_rank = int(os.environ["LOCAL_RANK"])\n'
    )
    monkeypatch.chdir(first)
    assert check("--select", "PFL307") == []
    moved = tmp_path / "moved"
    shutil.copytree(first, moved)
    (moved / "README.md").write_text("python -m torch.distributed.launch --nproc_per_node=2 train.py\n")
    monkeypatch.chdir(moved)
    assert check("--select", "PFL307") == [("train.py", "PFL307", 4)]


@pytest.mark.parametrize("dies_in", ["check", "summary"])
def test_a_worker_that_dies_ends_the_run_with_an_error_and_no_process_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dies_in: str
) -> None:
    # The kernel kills a worker when memory runs out: multiprocessing's pool waited for its results for ever.
    (tmp_path / "pyproject.toml").write_text("")
    for index in range(60):
        (tmp_path / f"train_{index}.py").write_text(SAVE)
    (tmp_path / "wrap.py").write_text("import torch.nn as nn\nmodel = nn.DataParallel(nn.Linear(2, 2))\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(pool, "available_cores", lambda: 2)
    parent = os.getpid()

    def killed_in_a_worker(original: Callable[..., object]) -> Callable[..., object]:
        def run(self: object, path: str, *rest: object) -> object:
            if os.getpid() != parent and path.endswith(("train_30.py", "wrap.py")):
                os.kill(os.getpid(), signal.SIGKILL)
            return original(self, path, *rest)

        return run

    if dies_in == "check":
        monkeypatch.setattr(Engine, "check_file", killed_in_a_worker(Engine.check_file))
    else:
        monkeypatch.setattr(ProjectModel, "summary", killed_in_a_worker(ProjectModel.summary))
    result = CliRunner().invoke(main, ["check", "--no-cache", "."])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        "error: a worker process ended while checking files (killed by SIGKILL, as the kernel kills a process when "
        "memory runs out); its files have no result, so the run stops\n"
    )
    assert multiprocessing.active_children() == []


def test_a_worker_that_dies_before_it_takes_the_shared_answers_ends_the_run_too(tmp_path: Path) -> None:
    # The parent waits for every worker to take its copy of the shared answers; the wait watches the workers as the
    # waits for results do. With the wait's limit an hour long, a parent that did not watch would hang past the timeout.
    (tmp_path / "pyproject.toml").write_text("")
    for index in range(60):
        (tmp_path / f"train_{index}.py").write_text(SAVE)
    probe = (
        "import os, signal, sys\n"
        "from pitfall_lint import pool\n"
        "from pitfall_lint.cli import main\n"
        "parent = os.getpid()\n"
        "share = pool._share_in_worker\n"
        "def dies(pickled):\n"
        "    if os.getpid() != parent:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return share(pickled)\n"
        "dies.__module__, dies.__qualname__ = pool.__name__, '_share_in_worker'\n"
        "pool._share_in_worker = dies\n"
        "pool._SHARING_WAIT_S = 3600.0\n"
        "pool.available_cores = lambda: 2\n"
        "main(['check', '--no-cache', '.'])\n"
    )
    ran = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert (ran.returncode, ran.stdout) == (2, "")
    assert ran.stderr.startswith("error: a worker process ended while checking files (killed by SIGKILL")
