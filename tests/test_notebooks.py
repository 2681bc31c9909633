"""Notebooks are checked cell by cell; PFL308 is their own pitfall; a malformed notebook is a PFL000."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint.cli import main
from pitfall_lint.engine import Engine
from pitfall_lint.rules import all_rules

from marks import REPO

FOLDER = REPO / "fixtures" / "PFL308-spawn-from-notebook"
_EXPECT = re.compile(r"#\s*expect:\s*(PFL\d{3})")


def notebook(*cells: str, kinds: tuple[str, ...] = ()) -> bytes:
    kinds = kinds or ("code",) * len(cells)
    return json.dumps({"cells": [{"cell_type": k, "source": c, "metadata": {}} for k, c in zip(kinds, cells)], "nbformat": 4}).encode()


def cell_marks(path: Path) -> set[tuple[str, int, int]]:
    cells = json.loads(path.read_text())["cells"]
    return {
        (match[1], number, line)
        for number, cell in enumerate(cells, start=1)
        for line, text in enumerate("".join(cell["source"]).splitlines(), start=1)
        if (match := _EXPECT.search(text))
    }


def reported(name: str, data: bytes) -> set[tuple[str, int | None, int]]:
    result = Engine(all_rules()).check_source(name, data)
    assert result.internal_error is None
    return {(d.code, d.cell, d.line) for d in result.diagnostics}


@pytest.mark.parametrize("name", ["bad.ipynb", "fixed.ipynb"])
def test_fixture_notebooks_report_exactly_their_marks(name: str) -> None:
    path = FOLDER / name
    assert reported(str(path), path.read_bytes()) == cell_marks(path)
    assert bool(cell_marks(path)) is (name == "bad.ipynb")


def test_cli_points_at_cell_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "nb.ipynb").write_bytes((FOLDER / "bad.ipynb").read_bytes())
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--no-cache", "."])
    assert result.exit_code == 1
    assert result.stdout.startswith("nb.ipynb:cell 4:1:1: PFL308 `spawn` of `train`, defined in this notebook")
    document = json.loads(CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", "nb.ipynb"]).stdout)
    assert [(d["cell"], d["line"], d["column"]) for d in document["diagnostics"]] == [(4, 1, 1)]


SPAWN_CELLS = ("import torch.multiprocessing as mp\n", "def work(rank):\n    pass\n")


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        ((*SPAWN_CELLS, "mp.spawn(work, nprocs=2)\n"), {("PFL308", 3, 1)}),
        ((*SPAWN_CELLS, "%%time\nmp.spawn(work, nprocs=2)\n"), set()),  # a cell magic: the cell is not Python
        ((*SPAWN_CELLS, "!nvidia-smi\n%env X=1\nmp.spawn(work, nprocs=2)\n"), {("PFL308", 3, 3)}),
        ((*SPAWN_CELLS, "mp.start_processes(work, nprocs=2, start_method='fork')\n"), set()),
        ((*SPAWN_CELLS, "from workers import train\nmp.spawn(train, nprocs=2)\n"), set()),
        ((*SPAWN_CELLS, "mp.spawn(work, nprocs=2)  # noqa: PFL308\n"), set()),
    ],
)
def test_spawn_from_notebook_forms(cells: tuple[str, ...], expected: set) -> None:
    assert reported("nb.ipynb", notebook(*cells)) == expected


def test_markdown_cells_are_skipped_and_counted() -> None:
    data = notebook("# mp.spawn(work)\n", *SPAWN_CELLS, "mp.spawn(work, nprocs=2)\n", kinds=("markdown", "code", "code", "code"))
    assert reported("nb.ipynb", data) == {("PFL308", 4, 1)}


def test_missing_main_guard_is_not_reported_in_notebooks() -> None:
    source = "import torch.multiprocessing as mp\nfrom workers import train\nmp.spawn(train, nprocs=2)\n"
    assert reported("nb.ipynb", notebook(source)) == set()
    assert reported("script.py", source.encode()) == {("PFL301", None, 3)}


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{not json", "invalid JSON"),
        (b'{"metadata": {}}', "no list of cells"),
        (b'{"cells": [1]}', "cell 1 is not an object"),
        (b'{"cells": [{"cell_type": "code", "source": 3}]}', "cell 1 has no text source"),
    ],
)
def test_malformed_notebook_is_pfl000(data: bytes, reason: str) -> None:
    (diagnostic,) = Engine(all_rules()).check_source("broken.ipynb", data).diagnostics
    assert (diagnostic.code, diagnostic.line) == ("PFL000", 1)
    assert reason in diagnostic.message


def test_notebook_with_a_syntax_error_names_the_cell() -> None:
    data = notebook("import torch\ntorch.save({}, 'x.pt')\n", "x = (\n")
    (diagnostic,) = Engine(all_rules()).check_source("nb.ipynb", data).diagnostics
    assert (diagnostic.code, diagnostic.cell) == ("PFL000", 2)
