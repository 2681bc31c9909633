"""`check --fix`: the exact rewrite of each fixable fixture, and the safety of every fix on every fixture."""

from __future__ import annotations

import ast
import io
import os
import stat
import subprocess
import sys
import textwrap
import tokenize
from collections import Counter
from pathlib import Path

import pytest

from marks import REPO

pytest.importorskip("libcst")

from pitfall_lint.fix import all_fixers, allowed, fix_source  # noqa: E402
from pitfall_lint.rules import all_rules  # noqa: E402

FIXTURES = sorted((REPO / "fixtures").glob("PFL*/*.py"))


def fixture(code: str) -> Path:
    (folder,) = (REPO / "fixtures").glob(f"{code}-*")
    return folder / "bad.py"


def fix(source: str | bytes, unsafe: bool = True, path: str = "example.py") -> bytes:
    data = source.encode() if isinstance(source, str) else source
    return fix_source(path, data, all_rules(), unsafe).fixed


def changed_lines(before: bytes, after: bytes) -> tuple[list[str], list[str]]:
    import difflib

    diff = list(difflib.ndiff(before.decode().splitlines(), after.decode().splitlines()))
    return [line[2:] for line in diff if line.startswith("- ")], [line[2:] for line in diff if line.startswith("+ ")]


# The rewrite of each fixable bad fixture: (removed lines, added lines), exactly.
EXPECTED = {
    "PFL102": (
        ["        output, _ = pad_packed_sequence(output, batch_first=True)  # expect: PFL102"],
        ["        output, _ = pad_packed_sequence(output, batch_first=True, total_length=padded.size(1))  # expect: PFL102"],
    ),
    "PFL201": (
        ['    torch.save(model.module.state_dict(), os.path.join(os.getcwd(), "checkpoint.pt"))  # expect: PFL201'],
        [
            "    if dist.get_rank() == 0:",
            '        torch.save(model.module.state_dict(), os.path.join(os.getcwd(), "checkpoint.pt"))  # expect: PFL201',
        ],
    ),
    "PFL202": (
        ["    model.load_state_dict(torch.load(CHECKPOINT))  # expect: PFL202"],
        ['    model.load_state_dict(torch.load(CHECKPOINT, map_location="cpu"))  # expect: PFL202'],
    ),
    "PFL301": (
        ["mp.spawn(worker, args=(2,), nprocs=2)  # expect: PFL301"],
        ['if __name__ == "__main__":', "    mp.spawn(worker, args=(2,), nprocs=2)  # expect: PFL301"],
    ),
    "PFL402": ([], ["        sampler.set_epoch(epoch)"]),
}


def test_every_rule_with_a_fix_has_a_fixer_and_back() -> None:
    assert set(all_fixers()) == {r.info.code for r in all_rules() if r.info.fix} == set(EXPECTED)


def test_each_rule_document_says_whether_it_has_a_fix() -> None:
    for rule in all_rules():
        (document,) = (REPO / "rules").glob(f"{rule.info.code}-*.md")
        header = document.read_text().splitlines()[2]
        said = {"safe": "Fix: safe", "unsafe": "Fix: unsafe", None: "Fix: none"}[rule.info.fix]
        assert said in header, (document.name, header)


@pytest.mark.parametrize("code", sorted(EXPECTED))
def test_fixable_fixture_gets_exactly_its_rewrite(code: str) -> None:
    before = fixture(code).read_bytes()
    after = fix(before)
    assert changed_lines(before, after) == EXPECTED[code]


def _tokens(data: bytes) -> tuple[Counter[str], Counter[str]]:
    comments: Counter[str] = Counter()
    code: Counter[str] = Counter()
    layout = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}
    for token in tokenize.tokenize(io.BytesIO(data).readline):
        if token.type == tokenize.COMMENT:
            comments[token.string] += 1
        elif token.type not in layout:
            code[token.string] += 1
    return comments, code


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fix_on_every_fixture_is_safe(path: Path) -> None:
    before = path.read_bytes()
    after = fix(before, path=str(path))
    ast.parse(after)  # the fixed file parses
    assert fix(after, path=str(path)) == after  # fixing twice changes nothing more
    codes = allowed(all_rules(), unsafe=True)
    left = fix_source(str(path), after, all_rules(), True)
    assert not left.applied
    from pitfall_lint.engine import Engine

    recheck = Engine(all_rules()).check_source(str(path), after).diagnostics
    assert [d for d in recheck if d.fix is not None and d.code in codes] == []  # what was fixed is no longer reported
    comments_before, code_before = _tokens(before)
    comments_after, code_after = _tokens(after)
    assert comments_after == comments_before  # every comment kept
    assert code_before - code_after == Counter()  # fixes add and move code; they never drop any


def test_safe_fixes_leave_the_unsafe_ones() -> None:
    source = fixture("PFL201").read_bytes()
    assert fix(source, unsafe=False) == source
    assert fix(source, unsafe=True) != source


# --- what the rules can and cannot trace -------------------------------------------------------------------


def test_pfl102_traces_through_renames_and_time_major_input() -> None:
    source = textwrap.dedent(
        """\
        import torch.nn as nn
        from torch.nn.utils import rnn


        class Encoder(nn.Module):
            def forward(self, x, lengths):
                packed = rnn.pack_padded_sequence(x, lengths)
                hidden = self.lstm(packed)[0]
                out, _ = rnn.pad_packed_sequence(hidden)
                return out
        """
    )
    assert changed_lines(source.encode(), fix(source))[1] == ["        out, _ = rnn.pad_packed_sequence(hidden, total_length=x.size(0))"]


@pytest.mark.parametrize(
    "forward",
    [
        # the padded input is an expression, which the fix would run twice
        "packed = pack_padded_sequence(self.embed(x), lengths, batch_first=True)\n        out, _ = self.lstm(packed)",
        # the name that held the padded input is rebound before the unpack
        "packed = pack_padded_sequence(x, lengths, batch_first=True)\n        x = None\n        out, _ = self.lstm(packed)",
        # batch_first only known at run time
        "packed = pack_padded_sequence(x, lengths, batch_first=self.bf)\n        out, _ = self.lstm(packed)",
        # the packed value comes from elsewhere
        "out, _ = self.lstm(self.packed)",
    ],
)
def test_pfl102_has_no_fix_when_the_input_cannot_be_traced(forward: str) -> None:
    source = (
        "import torch.nn as nn\nfrom torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence\n\n\n"
        "class Encoder(nn.Module):\n    def forward(self, x, lengths):\n"
        f"        {forward}\n        out, _ = pad_packed_sequence(out, batch_first=True)\n        return out\n"
    )
    from marks import reported

    assert {code for code, _ in reported(source)} == {"PFL102"}
    assert fix(source) == source.encode()


def test_pfl201_uses_the_rank_in_scope_and_guards_a_with_block() -> None:
    source = textwrap.dedent(
        """\
        import torch
        import torch.distributed as dist


        def save(model):
            dist.init_process_group("gloo")
            rank = dist.get_rank()
            # the checkpoint
            with open("ckpt.pt", "wb") as handle:
                torch.save(model.state_dict(), handle)
        """
    )
    assert fix(source).decode() == textwrap.dedent(
        """\
        import torch
        import torch.distributed as dist


        def save(model):
            dist.init_process_group("gloo")
            rank = dist.get_rank()
            # the checkpoint
            if rank == 0:
                with open("ckpt.pt", "wb") as handle:
                    torch.save(model.state_dict(), handle)
        """
    )


def test_pfl201_adds_the_import_it_needs() -> None:
    source = '"""Trains."""\nimport torch\n\ntorch.distributed.init_process_group("gloo")\ntorch.save({}, "state.pt")\n'
    assert fix(source).decode() == (
        '"""Trains."""\nimport torch\nimport torch.distributed\n\ntorch.distributed.init_process_group("gloo")\n'
        'if torch.distributed.get_rank() == 0:\n    torch.save({}, "state.pt")\n'
    )


def test_pfl201_leaves_a_returned_save_alone() -> None:
    source = 'import torch\nimport torch.distributed as dist\n\n\ndef save(m):\n    dist.init_process_group("gloo")\n    return torch.save(m, "m.pt")\n'
    assert fix(source) == source.encode()


def test_pfl202_maps_to_the_local_device() -> None:
    source = (
        "import os\nimport torch\nimport torch.distributed as dist\n\n\ndef resume(path):\n    dist.init_process_group('nccl')\n"
        "    device = torch.device(f\"cuda:{os.environ['LOCAL_RANK']}\")\n    return torch.load(path)\n"
    )
    assert changed_lines(source.encode(), fix(source))[1] == ["    return torch.load(path, map_location=device)"]


def test_pfl301_moves_what_uses_the_started_processes_and_keeps_definitions() -> None:
    source = textwrap.dedent(
        """\
        import torch.multiprocessing as mp

        WORLD = 2


        def work(rank):
            print(rank, WORLD)


        # start the workers
        context = mp.spawn(work, nprocs=WORLD, join=False)
        SETTING = 1
        context.join()


        def later():
            return SETTING
        """
    )
    assert fix(source).decode() == textwrap.dedent(
        """\
        import torch.multiprocessing as mp

        WORLD = 2


        def work(rank):
            print(rank, WORLD)


        SETTING = 1


        def later():
            return SETTING


        if __name__ == "__main__":
            # start the workers
            context = mp.spawn(work, nprocs=WORLD, join=False)
            context.join()
        """
    )


def test_pfl301_moves_into_the_existing_guard() -> None:
    source = 'import multiprocessing as mp\n\n\ndef f():\n    pass\n\n\nmp.Process(target=f).start()\n\nif __name__ == "__main__":\n    print("main")\n'
    assert fix(source).decode() == (
        'import multiprocessing as mp\n\n\ndef f():\n    pass\n\nif __name__ == "__main__":\n    mp.Process(target=f).start()\n    print("main")\n'
    )


def test_pfl301_moves_every_effect_in_order_and_keeps_definitions_in_place() -> None:
    source = textwrap.dedent(
        """\
        import torch.multiprocessing as mp

        print("starting")


        def work(rank):
            print("worker", rank)


        mp.spawn(work, nprocs=2)
        print("finished")
        with open("done.txt", "w") as done:
            done.write("done")
        """
    )
    assert fix(source).decode() == textwrap.dedent(
        """\
        import torch.multiprocessing as mp


        def work(rank):
            print("worker", rank)


        if __name__ == "__main__":
            print("starting")

            mp.spawn(work, nprocs=2)
            print("finished")
            with open("done.txt", "w") as done:
                done.write("done")
        """
    )


def test_pfl301_moves_effects_around_the_existing_guard_into_it() -> None:
    source = (
        'import multiprocessing as mp\n\n\ndef f():\n    pass\n\n\nprint("before")\nmp.Process(target=f).start()\n\n'
        'if __name__ == "__main__":\n    print("main")\nprint("after")\n'
    )
    assert fix(source).decode() == (
        'import multiprocessing as mp\n\n\ndef f():\n    pass\n\nif __name__ == "__main__":\n    print("before")\n'
        '    mp.Process(target=f).start()\n    print("main")\n    print("after")\n'
    )


def test_pfl301_moves_a_decorated_launcher_the_children_do_not_need() -> None:
    source = textwrap.dedent(
        """\
        import click
        import torch.multiprocessing as mp


        def work(rank):
            pass


        @click.command()
        def main():
            mp.spawn(work, nprocs=2)


        main()
        """
    )
    assert fix(source).decode() == textwrap.dedent(
        """\
        import click
        import torch.multiprocessing as mp


        def work(rank):
            pass


        if __name__ == "__main__":
            @click.command()
            def main():
                mp.spawn(work, nprocs=2)

            main()
        """
    )


def test_pfl301_moves_a_dataloader_loop_and_an_executor_at_import_under_the_guard() -> None:
    source = textwrap.dedent(
        """\
        from concurrent.futures import ProcessPoolExecutor

        import torch
        from torch.utils.data import DataLoader, TensorDataset


        def square(x):
            return x * x


        dataset = TensorDataset(torch.arange(8.0))
        loader = DataLoader(dataset, batch_size=2, num_workers=2)
        for (batch,) in loader:
            print(batch)
        with ProcessPoolExecutor() as executor:
            print(list(executor.map(square, range(4))))
        """
    )
    assert fix(source).decode() == textwrap.dedent(
        """\
        from concurrent.futures import ProcessPoolExecutor

        import torch
        from torch.utils.data import DataLoader, TensorDataset


        def square(x):
            return x * x


        if __name__ == "__main__":
            dataset = TensorDataset(torch.arange(8.0))
            loader = DataLoader(dataset, batch_size=2, num_workers=2)
            for (batch,) in loader:
                print(batch)
            with ProcessPoolExecutor() as executor:
                print(list(executor.map(square, range(4))))
        """
    )


@pytest.mark.parametrize(
    "source",
    [
        # the children read what an effect before the start binds: moved, they would not have it; left, they would
        # run it again
        "args = parse_args()\ndef work(rank):\n    print(args.lr)\nmp.spawn(work, nprocs=2)\n",
        # the children use a module whose state an effect before the start changes
        "import torch\ntorch.manual_seed(0)\ndef work(rank):\n    print(torch.rand(1))\nmp.spawn(work, nprocs=2)\n",
        # the parent fills a list the children read
        "RESULTS = []\ndef work(rank):\n    print(RESULTS)\nRESULTS.append(1)\nmp.spawn(work, nprocs=2)\n",
        # a helper the parent calls before the start fills what the children read
        "CACHE = {}\ndef warm():\n    CACHE['x'] = 1\ndef work(rank):\n    print(CACHE['x'])\nwarm()\nmp.spawn(work, nprocs=2)\n",
        # the children read a name bound only after the start: a forked child never has it
        "def work(rank):\n    print(LATE)\nmp.spawn(work, nprocs=2)\nLATE = 1\n",
        # an import after the start would run the imported module's code before the start
        "def work(rank):\n    pass\nmp.spawn(work, nprocs=2)\nimport json\nprint(json.dumps(1))\n",
        # a definition moved ahead of the call that, as written, fails without it
        "def work(rank):\n    pass\nmp.spawn(work, nprocs=2)\nprint(later())\ndef later():\n    return 1\n",
        # a name bound twice: which value the effects see depends on the order
        "X = 1\ndef work(rank):\n    pass\nmp.spawn(work, nprocs=2)\nprint(X)\nX = 2\n",
        # a definition that reads, when it runs, what an effect before it bound
        "def work(rank):\n    pass\nmp.spawn(work, nprocs=2)\nLIMIT = compute()\ndef f(limit=LIMIT):\n    return limit\n",
        # a definition between the existing guard and an effect after it would end up after that effect
        "def work(rank):\n    pass\nmp.spawn(work, nprocs=2)\nif __name__ == '__main__':\n    pass\nY = 1\nprint(Y)\n",
        # a star import binds names nobody can see
        "from os.path import *\ndef work(rank):\n    pass\nmp.spawn(work, nprocs=2)\n",
        # the work handed over is a value made of a function that reads what an effect before the start binds
        ("def square():\n    return TABLE\nJOBS = [square]\ndef run(job):\n    return job()\nTABLE = load()\n"
        "with mp.Pool(2) as pool:\n    pool.map(run, JOBS)\n"),
        # the same for the dataset a DataLoader's workers get
        ("from torch.utils.data import DataLoader\ndef square():\n    return TABLE\nJOBS = [square]\n"
        "TABLE = load()\nfor batch in DataLoader(JOBS, num_workers=2):\n    pass\n"),
    ],
    ids=["bound-before", "module-state", "filled-list", "helper-fills", "bound-after", "import-after", "called-before-defined",
         "rebound", "default-from-effect", "definition-after-guard", "star-import", "handed-value-reads-an-effect",
         "dataset-reads-an-effect"],
)
def test_pfl301_gives_no_fix_when_the_move_could_change_the_program(source: str) -> None:
    from marks import reported

    source = "import torch.multiprocessing as mp\n" + source
    assert "PFL301" in {code for code, _ in reported(source)}
    assert fix(source, unsafe=True) == source.encode()


def test_pfl402_fixes_a_for_loop_only() -> None:
    template = (
        "import torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n\n\n"
        "def train(ds, epochs):\n    dist.init_process_group('gloo')\n    sampler = DistributedSampler(ds)\n"
        "    loader = DataLoader(ds, sampler=sampler)\n{loop}\n        for batch in loader:\n            pass\n"
    )
    with_for = template.format(loop="    for epoch in range(epochs):")
    assert changed_lines(with_for.encode(), fix(with_for))[1] == ["        sampler.set_epoch(epoch)"]
    with_while = template.format(loop="    while epochs:")
    assert fix(with_while) == with_while.encode()  # no epoch number to pass


def test_pfl402_has_no_fix_when_the_loop_knows_the_loader_by_another_name() -> None:
    source = (
        "import torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n\n\n"
        "def train_one_epoch(dl):\n    for batch in dl:\n        pass\n\n\n"
        "def main(ds, epochs):\n    dist.init_process_group('gloo')\n    loader = DataLoader(ds, sampler=DistributedSampler(ds))\n"
        "    for epoch in range(epochs):\n        train_one_epoch(loader)\n"
    )
    from marks import reported

    assert reported(source) == {("PFL402", 12)}
    assert fix(source) == source.encode()  # `dl` is the helper's name for it: `dl.sampler` would not exist in main


def test_noqa_and_per_file_ignores_are_not_fixed(tmp_path: Path) -> None:
    bad = fixture("PFL301").read_text()
    (tmp_path / "silenced.py").write_text(bad.replace("# expect: PFL301", "# noqa: PFL301"))
    (tmp_path / "ignored.py").write_text(bad)
    (tmp_path / "pyproject.toml").write_text('[tool.pitfall-lint.per-file-ignores]\n"ignored.py" = ["PFL301"]\n')
    result = run("check", "--no-cache", "--fix", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "silenced.py").read_text() == bad.replace("# expect: PFL301", "# noqa: PFL301")
    assert (tmp_path / "ignored.py").read_text() == bad


# --- the command line and the file on disk -----------------------------------------------------------------


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pitfall_lint", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_fix_writes_reports_what_is_left_and_keeps_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    target.write_bytes(fixture("PFL301").read_bytes())
    target.chmod(0o751)
    result = run("check", "--no-cache", "--fix", "train.py", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "Fixed 1 finding in 1 file.\n")
    assert result.stdout == "All checks passed! (1 file checked)\n"
    assert changed_lines(fixture("PFL301").read_bytes(), target.read_bytes()) == EXPECTED["PFL301"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]  # no temporary file left


def test_a_file_its_user_may_not_write_is_left_alone(tmp_path: Path) -> None:
    """As root too, whom the kernel lets write anything: a file without its owner's write bit was protected on
    purpose, and the rename that replaces it needs only the folder's permission."""
    target = tmp_path / "train.py"
    target.write_bytes(fixture("PFL301").read_bytes())
    target.chmod(0o444)
    result = run("check", "--no-cache", "--fix", "train.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "error: train.py: cannot fix: Permission denied\nFixed 0 findings in 0 files.\n"
    assert result.stdout.startswith("train.py:16:1: PFL301 ")
    assert target.read_bytes() == fixture("PFL301").read_bytes()
    assert stat.S_IMODE(target.stat().st_mode) == 0o444
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_diff_prints_the_patch_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    target.write_bytes(fixture("PFL201").read_bytes())  # PFL201: a preview rule since 2026-11-25, hence --preview
    result = run("check", "--no-cache", "--preview", "--diff", "train.py", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "")  # the only fix is unsafe
    assert result.stderr == "Would fix 0 findings in 0 files (1 more with --unsafe-fixes).\n"
    result = run("check", "--no-cache", "--preview", "--diff", "--unsafe-fixes", "train.py", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith("--- a/train.py\n+++ b/train.py\n@@ ")
    assert "+    if dist.get_rank() == 0:\n" in result.stdout
    assert target.read_bytes() == fixture("PFL201").read_bytes()


@pytest.mark.parametrize(
    ("name", "transform"),
    [
        ("crlf", lambda data: data.replace(b"\n", b"\r\n")),
        ("bom", lambda data: b"\xef\xbb\xbf" + data),
        ("latin-1", lambda data: b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + data),
    ],
)
def test_encoding_and_line_endings_are_kept(tmp_path: Path, name: str, transform) -> None:  # type: ignore[no-untyped-def]
    original = transform(fixture("PFL102").read_bytes())
    target = tmp_path / "model.py"
    target.write_bytes(original)
    result = run("check", "--no-cache", "--fix", "model.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    fixed = target.read_bytes()
    expected = transform(fix(fixture("PFL102").read_bytes()))
    assert fixed == expected
    if name == "crlf":
        assert b"\n" not in fixed.replace(b"\r\n", b"")


def test_fix_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_bytes(fixture("PFL301").read_bytes())
    (tmp_path / "link.py").symlink_to(real)
    assert run("check", "--no-cache", "--fix", "link.py", cwd=tmp_path).returncode == 0
    assert (tmp_path / "link.py").is_symlink()
    assert b'if __name__ == "__main__":' in real.read_bytes()


def test_an_interrupted_write_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pitfall_lint.fix import write

    target = tmp_path / "train.py"
    target.write_bytes(b"old\n")

    def interrupted(source: str, destination: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(write.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write.replace_if_unchanged(str(target), b"old\n", b"new\n")
    assert target.read_bytes() == b"old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]


def test_a_file_changed_since_it_was_checked_is_not_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from pitfall_lint import cli
    from pitfall_lint.fix import session

    target = tmp_path / "train.py"
    target.write_bytes(fixture("PFL301").read_bytes())
    original_fix_source = session.fix_source

    def someone_else_writes(path: str, data: bytes, *options):  # type: ignore[no-untyped-def]
        result = original_fix_source(path, data, *options)
        Path(path).write_text("# edited meanwhile\n")
        return result

    monkeypatch.setattr(session, "fix_source", someone_else_writes)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.main, ["check", "--no-cache", "--fix", "train.py"])
    assert target.read_text() == "# edited meanwhile\n"
    assert "warning: train.py: changed on disk while it was being fixed; left as it is" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_plain_check_does_not_import_libcst(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom pitfall_lint import cli\n"
        f"CliRunner().invoke(cli.main, ['check', '--no-cache', {str(REPO / 'fixtures')!r}])\n"
        "print('libcst' in sys.modules)\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={**os.environ})
    assert completed.stdout == "False\n", completed.stderr


def test_notebooks_are_reported_but_not_fixed(tmp_path: Path) -> None:
    from test_notebooks import notebook

    cell = fixture("PFL402").read_text().split('if __name__ == "__main__":')[0]
    data = notebook("# setup", cell)
    (tmp_path / "train.ipynb").write_bytes(data)
    result = run("check", "--no-cache", "--fix", "--format", "json", "train.ipynb", cwd=tmp_path)
    assert result.returncode == 1
    assert '"code": "PFL402"' in result.stdout and '"cell": 2' in result.stdout
    assert (tmp_path / "train.ipynb").read_bytes() == data


def test_the_held_back_count_leaves_out_notebooks_whose_fixes_are_never_made(tmp_path: Path) -> None:
    from test_notebooks import notebook

    # PFL201 (unsafe fix): a preview rule since 2026-11-25, hence --preview.
    (tmp_path / "train.py").write_bytes(fixture("PFL201").read_bytes())
    (tmp_path / "train.ipynb").write_bytes(notebook("import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n", "torch.save({}, 'a.pt')\n"))
    assert run("check", "--no-cache", "--preview", "train.ipynb", cwd=tmp_path).stdout.startswith("train.ipynb:cell 2:1:1: PFL201 `torch.save`")
    result = run("check", "--no-cache", "--preview", "--diff", ".", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == "Would fix 0 findings in 0 files (1 more with --unsafe-fixes).\n"
    result = run("check", "--no-cache", "--preview", "--diff", "train.ipynb", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "Would fix 0 findings in 0 files.\n")
