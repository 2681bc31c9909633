"""Notebooks are checked cell by cell; PFL308 is their own pitfall; a malformed notebook is a PFL000."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint.cli import main
from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.engine import Engine
from pitfall_lint.notebook import file_lines
from pitfall_lint.report import FileLines
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
        # A shell command continued over several lines, and the output of a command or a magic assigned.
        ((*SPAWN_CELLS, "! python prepare.py --data_dir data \\\n      --split train \\\n      --out data\nmp.spawn(work, nprocs=2)\n"), {("PFL308", 3, 4)}),
        ((*SPAWN_CELLS, "files = !ls data\nresult, other = %timeit -o sum(files)\nmp.spawn(work, nprocs=2)\n"), {("PFL308", 3, 3)}),
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


@pytest.mark.parametrize(
    "cell",
    [
        "if IN_COLAB:\n    !pip install torch\n    %env X=1\n",  # a magic is a statement of its block
        "message = 'parameters %s are left' \\\n    % (left,)\n",  # a `%` that Python goes on in is Python
        "pip install sagemaker awscli\nls ./embeddings/\n",  # magics IPython runs without their `%`
        "    model = train()\n    result = !ls\n",  # an indented first line: IPython dedents the cell
    ],
)
def test_ipython_cells_are_read_as_ipython_reads_them(cell: str) -> None:
    """The notebook parses (no PFL000), so its spawn is found."""
    cells = (*reversed(SPAWN_CELLS), cell, "mp.spawn(work, nprocs=2)\n")  # the cell before ends at the top level
    assert reported("nb.ipynb", notebook(*cells)) == {("PFL308", 4, 1)}


def test_a_magic_line_too_deep_for_the_parser_is_a_magic_not_a_crash() -> None:
    """`compile` gives up on it with a MemoryError: no Python, so IPython's automagic, as any line that fails."""
    cell = "import torch.multiprocessing as mp\ndef work(rank):\n    pass\npip " + "-" * 200_000 + "x\nmp.spawn(work, nprocs=2)\n"
    assert reported("nb.ipynb", notebook(cell)) == {("PFL308", 1, 5)}


def test_a_name_of_a_magic_used_as_python_stays_python() -> None:
    """`ls = ...` and `cd(path)` are Python: IPython runs them as Python, and so they are checked."""
    cell = "import torch.multiprocessing as mp\nls = ['a']\ncd = lambda p: p\ndef work(rank):\n    pass\nmp.spawn(work, nprocs=2)\n"
    assert reported("nb.ipynb", notebook(cell)) == {("PFL308", 1, 6)}


def test_columns_in_an_indented_cell_are_those_of_the_cell() -> None:
    data = notebook("def work(rank):\n    pass\nimport torch.multiprocessing as mp\n", "    mp.spawn(work, nprocs=2)\n")
    (diagnostic,) = Engine(all_rules()).check_source("nb.ipynb", data).diagnostics
    assert (diagnostic.code, diagnostic.cell, diagnostic.line, diagnostic.column, diagnostic.end_column) == ("PFL308", 2, 1, 5, 29)


def test_notebook_with_a_syntax_error_names_the_cell() -> None:
    data = notebook("import torch\ntorch.save({}, 'x.pt')\n", "x = (\n")
    (diagnostic,) = Engine(all_rules()).check_source("nb.ipynb", data).diagnostics
    assert (diagnostic.code, diagnostic.cell) == ("PFL000", 2)


def _jupyter_text(cells: list[dict]) -> bytes:
    """A notebook as Jupyter writes it (nbformat: indent 1, one source line per JSON line)."""
    return (json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n").encode()


def test_file_lines_point_at_the_json_line_holding_each_source_line() -> None:
    data = _jupyter_text([
        {"cell_type": "markdown", "metadata": {}, "source": ["# \"source\": [\n", "text"]},
        {"cell_type": "code", "metadata": {}, "outputs": [{"output_type": "stream", "name": "stdout", "text": ['"source": [\n']}],
         "source": ["x = \"a\\\\b\"\n", "\n", "y = 'é'\n", "z = 1"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["a = 1\n", "b = 2\nc = 3\n"]},  # two lines in one string
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": "p = 1\nq = 2\n"},  # the source as one string
    ])
    lines = file_lines(data)
    text = data.decode().splitlines()
    holding = {cell: [text[n - 1].strip() for n in numbers] for cell, numbers in lines.items()}
    assert holding == {
        2: ['"x = \\"a\\\\\\\\b\\"\\n",', '"\\n",', '"y = \'\\u00e9\'\\n",', '"z = 1"'],
        3: ['"a = 1\\n",', '"b = 2\\nc = 3\\n"', '"b = 2\\nc = 3\\n"'],
        4: ['"source": "p = 1\\nq = 2\\n"', '"source": "p = 1\\nq = 2\\n"'],
    }


def test_github_and_sarif_keep_the_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "nb.ipynb").write_bytes((FOLDER / "bad.ipynb").read_bytes())
    monkeypatch.chdir(tmp_path)
    in_file = (FOLDER / "bad.ipynb").read_text().splitlines()
    at = next(n for n, text in enumerate(in_file, start=1) if '"mp.spawn(train' in text)  # cell 4, line 1
    github = CliRunner().invoke(main, ["check", "--no-cache", "--format", "github", "nb.ipynb"]).stdout
    assert github.startswith(
        f"::error file=nb.ipynb,line={at},endLine={at},title=PFL308 spawn-from-notebook in cell 4%2C line 1%2C column 1"
        "::PFL308 `spawn` of `train`"
    )
    assert at == 43
    sarif = json.loads(CliRunner().invoke(main, ["check", "--no-cache", "--format", "sarif", "nb.ipynb"]).stdout)
    (result,) = sarif["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": at, "endLine": at}
    assert result["message"]["text"].startswith("cell 4, line 1, column 1: `spawn` of `train`")
    assert result["properties"] == {"notebookCell": 4, "cellLine": 1, "cellColumn": 1, "cellEndLine": 1, "cellEndColumn": 37}


def test_a_notebook_that_cannot_be_located_gets_no_line_rather_than_a_wrong_one(tmp_path: Path) -> None:
    diagnostic = Diagnostic(str(tmp_path / "gone.ipynb"), 1, 1, "PFL308", "spawn-from-notebook", 1, 5, "error", "m", cell=2)
    assert FileLines()(diagnostic) is None
    (tmp_path / "short.ipynb").write_bytes(notebook("x = 1\n", "y = 2\n"))
    assert FileLines()(replace(diagnostic, path=str(tmp_path / "short.ipynb"), line=3, end_line=3)) is None
    assert FileLines()(replace(diagnostic, path=str(tmp_path / "short.ipynb"))) == (1, 1)  # one-line JSON: line 1


def test_findings_are_in_cell_order_then_line_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A later cell's first line comes after an earlier cell's third: lines count within their cell."""
    setup = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
    (tmp_path / "nb.ipynb").write_bytes(notebook(setup, "x = 1\n", "y = 2\nz = 3\ntorch.save({}, 'a.pt')\n", "torch.save({}, 'b.pt')\n"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--preview", "--select", "PFL201", "nb.ipynb"])
    assert [line.split(" PFL201 ")[0] for line in result.stdout.splitlines()] == [
        "nb.ipynb:cell 3:3:1:", "nb.ipynb:cell 4:1:1:", "Found 2 diagnostics in 1 of 1 file checked."
    ]


def test_a_finding_outside_any_cell_comes_first() -> None:
    first = Diagnostic("nb.ipynb", 2, 1, "PFL000", "parse-error", 2, 1, "error", "m")
    in_cell = [replace(first, cell=4, line=1, end_line=1), replace(first, cell=3, line=5, end_line=5)]
    assert sorted([*in_cell, first]) == [first, in_cell[1], in_cell[0]]
