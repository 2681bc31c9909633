"""A file written for Python 3.12-3.14 gets, whichever Python runs pitfall-lint, the findings its twin written in 3.11
syntax gets (tests/newer_syntax: `x.py` and its twin `x_311.py`, lines and columns alike); syntax newer than the
project's target Python is a PFL000 that names the version it needs, and the rules still run."""

from __future__ import annotations

import ast
import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from marks import REPO, expected, inside
from pitfall_lint import lowering, parsing
from pitfall_lint.cli import main
from pitfall_lint.config import TargetVersion, requires_python_floor
from pitfall_lint.engine import Engine
from pitfall_lint.lowering import lower
from pitfall_lint.rules import all_rules

NEWER = REPO / "tests" / "newer_syntax"
PAIRS = sorted(path.stem for path in NEWER.glob("*.py") if not path.stem.endswith("_311"))
RUNNING = f"{sys.version_info[0]}.{sys.version_info[1]}"


def findings(path: str, data: bytes) -> list[tuple[object, ...]]:
    result = Engine(all_rules()).check_source(path, data)
    assert result.internal_error is None, result.internal_error
    return [(d.code, d.cell, d.line, d.column, d.end_line, d.end_column, d.message) for d in result.diagnostics]



def check(folder: Path, *arguments: str, cache: bool = False) -> tuple[int, list[tuple[str, str, int, int, str]]]:
    with inside(folder):
        caching = [] if cache else ["--no-cache"]
        result = CliRunner().invoke(main, ["check", *caching, "--preview", "--select", "ALL", "--format", "json", *arguments])
    assert result.exit_code in (0, 1), result.output
    rows = json.loads(result.stdout)["diagnostics"]
    return result.exit_code, [(d["path"], d["code"], d["line"], d["column"], d["message"]) for d in rows]


def project(tmp_path: Path, pyproject: str | None, *names: str) -> Path:
    for name in names:
        shutil.copy(NEWER / name, tmp_path / name)
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    return tmp_path


# -- the same findings as the twin


@pytest.mark.parametrize("name", PAIRS)
def test_a_file_of_newer_syntax_gets_the_findings_of_its_twin(name: str) -> None:
    newer, twin = NEWER / f"{name}.py", NEWER / f"{name}_311.py"
    found = findings(str(newer), newer.read_bytes())
    assert found == findings(str(twin), twin.read_bytes())
    assert {(code, line) for code, _, line, *_ in found} == expected(newer.read_text()) != set()


def test_the_pairs_are_newer_syntax_and_its_twin() -> None:
    """Each newer file uses syntax this Python's own parser may lack; each twin parses on any Python 3.9+."""
    assert PAIRS == ["pep695_alias", "pep695_model", "pep701_save", "pep750_template", "pep758_except"]
    for name in PAIRS:
        assert lower((NEWER / f"{name}.py").read_text()).features
        twin = (NEWER / f"{name}_311.py").read_text()
        assert lower(twin).features == ()
        ast.parse(twin, feature_version=(3, 9))


def test_a_newer_file_tells_another_file_of_the_project_what_it_wraps(tmp_path: Path) -> None:
    """The project model reads the other files as the check does: the DataParallel wrap of a file of Python 3.12
    still reaches the class of model.py (in a project that trains with DDP, only a wrap found reaches a class)."""
    (tmp_path / "model.py").write_text(
        "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self) -> None:\n        super().__init__()\n"
        "        self.forward = self.run\n\n    def run(self, x):\n        return x\n"
    )
    (tmp_path / "train.py").write_text(
        'import torch.nn as nn\nfrom model import Net\n\nrun = {"name": "dp"}\nprint(f"{run["name"]}")\n'
        "model = nn.DataParallel(Net())\n"
    )
    (tmp_path / "ddp.py").write_text(
        "import torch.distributed as dist\nimport torch.nn as nn\n\ndist.init_process_group('gloo')\n"
        "model = nn.parallel.DistributedDataParallel(nn.Linear(2, 2))\n"
    )
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    _, rows = check(tmp_path, "model.py")
    assert [(path, code, line, column) for path, code, line, column, _ in rows] == [("model.py", "PFL101", 7, 9)]


def notebook(*cells: str) -> bytes:
    return json.dumps({"cells": [{"cell_type": "code", "source": c, "metadata": {}} for c in cells], "nbformat": 4}).encode()


def test_a_notebook_cell_of_newer_syntax_gets_the_findings_of_its_twin() -> None:
    setup = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
    newer = notebook(setup, 'run = {"out": "ckpt"}\ntorch.save({}, f"{run["out"]}.pt")\n')
    twin = notebook(setup, "run = {'out': 'ckpt'}\ntorch.save({}, f\"{run['out']}.pt\")\n")
    found = findings("nb.ipynb", newer)
    assert found == findings("nb.ipynb", twin)
    assert [row[:6] for row in found] == [("PFL201", 2, 2, 1, 2, 35)]


def test_a_notebook_line_of_newer_syntax_that_names_a_magic_is_python() -> None:
    """`cat = ...` is Python, not the `cat` magic, however new its syntax: IPython on Python 3.12 runs it."""
    cell = (
        'import torch\nimport torch.distributed as dist\ndist.init_process_group("gloo")\nrun = {"out": "c"}\n'
        'cat = torch.save({}, f"{run["out"]}.pt")\n'
    )
    assert [(code, cell, line) for code, cell, line, *_ in findings("nb.ipynb", notebook(cell))] == [("PFL201", 1, 5)]


# -- files that do not parse


def test_a_broken_file_is_a_parse_error_as_before() -> None:
    source = b"import torch\ntorch.save({}, 'x.pt')\ndef broken(:\n    pass\n"
    assert findings("x.py", source) == [("PFL000", None, 3, 12, 3, 12, "cannot parse: invalid syntax")]


def test_a_broken_file_of_newer_syntax_is_reported_where_it_is_broken() -> None:
    """Not at its first f-string of Python 3.12 (`f-string: expecting '}'` before): at the error Python 3.12 reports."""
    source = b'import torch\nname = f"{"ckpt"}.pt"\ntorch.save({}, name)\ndef broken(:\n    pass\n'
    assert findings("x.py", source) == [("PFL000", None, 4, 12, 4, 12, "cannot parse: invalid syntax")]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 parses comments inside replacement fields")
def test_newer_syntax_that_cannot_be_lowered_names_the_version_it_needs() -> None:
    source = b'import torch\nname = f"""{\n    "ckpt"  # the stem\n}.pt"""\ntorch.save({}, name)\n'
    message = (
        "cannot parse: f-string expression part cannot include '#' (comment inside an f-string's replacement field "
        f"needs Python 3.12 (PEP 701); pitfall-lint runs on Python {RUNNING} here)"
    )
    assert findings("x.py", source) == [("PFL000", None, 4, 8, 4, 8, message)]


# -- the project's target version

PEP701_AT_TARGET = [
    ("pep701_save.py", "PFL000", 12, 28, "f-string reusing its quotes inside a replacement field needs Python 3.12 (PEP 701); the project targets Python 3.10 (requires-python)"),
    ("pep701_save.py", "PFL000", 12, 38, "backslash inside an f-string's replacement field needs Python 3.12 (PEP 701); the project targets Python 3.10 (requires-python)"),
]


def test_syntax_newer_than_requires_python_is_reported_and_the_rules_still_run(tmp_path: Path) -> None:
    folder = project(tmp_path, "[project]\nname = 'x'\nrequires-python = '>=3.10, <4'\n", "pep701_save.py")
    exit_code, rows = check(folder, ".")
    assert exit_code == 1
    assert [row[:4] for row in rows] == [(*row[:4],) for row in PEP701_AT_TARGET] + [("pep701_save.py", "PFL201", 13, 5)]
    assert [row[4] for row in rows[:2]] == [row[4] for row in PEP701_AT_TARGET]


def test_target_version_setting_wins_over_requires_python(tmp_path: Path) -> None:
    pyproject = "[project]\nname = 'x'\nrequires-python = '>=3.12'\n\n[tool.pitfall-lint]\ntarget-version = 'py311'\n"
    folder = project(tmp_path, pyproject, "pep695_alias.py", "pep750_template.py")
    _, rows = check(folder, ".")
    assert [row for row in rows if row[1] == "PFL000"] == [
        ("pep695_alias.py", "PFL000", 6, 1, "`type` statement needs Python 3.12 (PEP 695); the project targets Python 3.11 (target-version)"),
        ("pep695_alias.py", "PFL000", 7, 10, "type parameter list needs Python 3.12 (PEP 695); the project targets Python 3.11 (target-version)"),
        ("pep695_alias.py", "PFL000", 7, 13, "type parameter default needs Python 3.13 (PEP 696); the project targets Python 3.11 (target-version)"),
        ("pep750_template.py", "PFL000", 9, 30, "template string (t-string) needs Python 3.14 (PEP 750); the project targets Python 3.11 (target-version)"),
    ]


def test_no_report_where_the_target_has_the_syntax(tmp_path: Path) -> None:
    folder = project(tmp_path, "[tool.pitfall-lint]\ntarget-version = 'py312'\n", "pep701_save.py", "pep758_except.py")
    _, rows = check(folder, ".")
    assert [row for row in rows if row[1] == "PFL000"] == [
        ("pep758_except.py", "PFL000", 11, 5, "`except` naming several exceptions without parentheses needs Python 3.14 (PEP 758); the project targets Python 3.12 (target-version)"),
    ]


@pytest.mark.parametrize("pyproject", [None, "[project]\nname = 'x'\n", "[project]\nname = 'x'\nrequires-python = '<4'\n", "[project\n"])
def test_no_report_where_the_target_is_unknown(tmp_path: Path, pyproject: str | None) -> None:
    folder = project(tmp_path, pyproject, "pep701_save.py")
    assert [row[:4] for row in check(folder, "pep701_save.py")[1]] == [("pep701_save.py", "PFL201", 13, 5)]


def test_the_target_is_part_of_the_cached_result(tmp_path: Path) -> None:
    folder = project(tmp_path, "[project]\nname = 'x'\nrequires-python = '>=3.12'\n", "pep701_save.py")
    assert [row[1] for row in check(folder, ".", cache=True)[1]] == ["PFL201"]
    (folder / "pyproject.toml").write_text("[project]\nname = 'x'\nrequires-python = '>=3.10'\n")
    assert [row[1] for row in check(folder, ".", cache=True)[1]] == ["PFL000", "PFL000", "PFL201"]


def test_a_target_report_is_silenced_by_noqa(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.pitfall-lint]\ntarget-version = 'py310'\n")
    (tmp_path / "save.py").write_text(
        'import torch\nimport torch.distributed as dist\ndist.init_process_group("gloo")\n'
        'run = {"out": "c"}\ntorch.save({}, f"{run["out"]}.pt")  # noqa: PFL000\n'
    )
    assert [row[1:3] for row in check(tmp_path, ".")[1]] == [("PFL201", 5)]


@pytest.mark.parametrize("value", ["py2", "3.10", 310, "py315"])
def test_an_unknown_target_version_is_a_one_line_error(tmp_path: Path, value: object) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.pitfall-lint]\ntarget-version = {json.dumps(value)}\n")
    with inside(tmp_path):
        result = CliRunner().invoke(main, ["check", "."])
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {tmp_path / 'pyproject.toml'}: [tool.pitfall-lint] target-version: expected one of 'py37', 'py38', "
        f"'py39', 'py310', 'py311', 'py312', 'py313', 'py314', got {value!r}\n"
    )


@pytest.mark.parametrize(
    ("specifier", "floor"),
    [(">=3.10", (3, 10)), ("~=3.9", (3, 9)), (">= 3.8, <4", (3, 8)), ("==3.11.*", (3, 11)), (">3.9", (3, 9)),
     (">=3.9.2,!=3.9.7", (3, 9)), (">=3", (3, 0)), ("<4", None), ("!=3.9.*", None), ("", None), ("python3.10", None)],
)
def test_the_lower_bound_of_requires_python(specifier: str, floor: tuple[int, int] | None) -> None:
    assert requires_python_floor(specifier) == floor


@pytest.mark.parametrize("name", PAIRS)
def test_a_newer_python_that_parses_the_file_reports_the_same_syntax(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On Python 3.14 no lowering is needed; the file's text is then scanned for the newer syntax, which gives what
    the lowering met here."""
    data = (NEWER / f"{name}.py").read_bytes()
    target = TargetVersion((3, 10), "requires-python")
    lowered = parsing.parse_source(data, "x.py")
    monkeypatch.setattr(parsing, "RUNNING", (3, 14))
    as_parsed = parsing.ParsedSource(lowered.tree, data)
    assert parsing.newer_than_target(as_parsed, target) == parsing.newer_than_target(lowered, target) != []


def test_the_oldest_python_lowering_knows_is_that_of_its_oldest_syntax() -> None:
    versions = [value.version for value in vars(lowering).values() if isinstance(value, lowering.Feature)]
    assert len(versions) == 10 and min(versions) == parsing.OLDEST_LOWERED


def test_a_newer_python_scans_no_file_for_a_target_it_is_not_newer_than(monkeypatch: pytest.MonkeyPatch) -> None:
    data = (NEWER / "pep701_save.py").read_bytes()
    parsed = parsing.ParsedSource(ast.parse("pass"), data)
    monkeypatch.setattr(parsing, "RUNNING", (3, 12))
    assert parsing.newer_than_target(parsed, TargetVersion((3, 12), "target-version")) == []
    monkeypatch.setattr(parsing, "RUNNING", (3, 11))  # a file Python 3.11 parsed holds no syntax of 3.12
    assert parsing.newer_than_target(parsed, TargetVersion((3, 10), "target-version")) == []


# -- the scanner

UNCHANGED = [
    'x = "a \\" b" + \'c \\\' d\'\n',
    'x = """a " "" \' \'\'\' b""" + \'\'\'c\n"""\'\'\'\n',
    "x = f'{a[\"b\"]}' + f\"{c['d']}\" + f'''{e[\"f\"] + g['h']}'''\n",
    "x = f'''{f\"{f'{y}'}\"}'''\n",
    'x = f"{{}} {{{a}}} }}"\n',
    'x = f"{a:>{width}.{precision}f} {b!r:^10} {c=} {d = !s:>4} {e!a}"\n',
    'x = b"\\x00\'" + rb"\\d\'" + Rb"\\"" + u"\\u1234" + BR"\\\\"\n',
    r'''x = r"\\" + rf"\{a}\{{" + fr"{b}\N{c}" + f"\N{EM DASH} {d}" + r"\"" + rb'\'' + "\\"''' + "\n",
    '# a comment with "quotes\' and f"{x["y"]}"\nx = 1  # type X = int\n',
    "if'a'in x: y = 'b'if z else'c'\n",
    "ok = (\n    type in [int]\n)\ntype = 1\ntype(x)\nclass C(Base[int]):\n    def f(self, x: list[int]) -> None: ...\n",
    "try:\n    pass\nexcept (A, B) as e:\n    pass\nexcept C as e:\n    pass\nexcept:\n    pass\n",
    'x = f"{\'#\'}" + f"{ {1: 2}[1] }" + f"{(lambda: 1)()}" + f"{a!=b}" + f"{x:=10}"\n',
    'x = f"""{\n    a\n    + b\n}"""\n',
]


@pytest.mark.parametrize("text", UNCHANGED)
def test_text_of_python_3_11_is_left_as_it_is(text: str) -> None:
    ast.parse(text)
    assert (lower(text).text, lower(text).features) == (text, ())


LOWERED = [
    ('x = f"{d["a"]}"\n', "x = f\"{d['a']}\"\n", [("f-string reusing", 1, 10)]),
    ('x = f"{f"{f"{y}"}"}"\n', "x = f\"{f'{______}'}\"\n", [("f-string reusing", 1, 8)]),
    ("x = f'{\"it's\"}'\n", "x = f'{______}'\n", [("f-string reusing", 1, 8)]),
    ('x = f"{\'\\n\'.join(y)} {{}}"\n', 'x = f"{____.join(y)} {{}}"\n', [("backslash inside", 1, 8)]),
    ('x = f"{a:{"b"}>{w!r}}" + f"{y=}"\n', "x = f\"{a:{'b'}>{w!r}}\" + f\"{y=}\"\n", [("f-string reusing", 1, 11)]),
    ('x = f"""{d["""k"""]}"""\n', "x = f\"\"\"{d['''k''']}\"\"\"\n", [("f-string reusing", 1, 12)]),
    ('x = t"{a}" + Rt"\\{b}"\n', 'x = f"{a}" + Rf"\\{b}"\n', [("template string", 1, 5)]),
    ("def f[T](x: T) -> T: ...\n", "def f   (x: T) -> T: ...\n", [("type parameter list", 1, 6)]),
    (
        "async def f[T = int](): ...\n",
        "async def f         (): ...\n",
        [("type parameter list", 1, 12), ("type parameter default", 1, 15)],
    ),
    (
        "class C[\n    T,  # first\n    U: (int, str),\n](B): ...\n",
        "class C\\\n" + " " * 14 + "\\\n" + " " * 17 + "\\\n (B): ...\n",
        [("type parameter list", 1, 8)],
    ),
    (
        "if x:\n    type A[T] = list[T]\n",
        "if x:\n    A         = list[T]\n",
        [("`type` statement", 2, 5), ("type parameter list", 2, 11)],
    ),
    ("try:\n    pass\nexcept* A, B:\n    pass\n", "try:\n    pass\nexcept* A   :\n    pass\n", [("`except` naming", 3, 1)]),
]


@pytest.mark.parametrize(("text", "lowered", "features"), LOWERED)
def test_newer_syntax_is_lowered_keeping_lines_and_columns(
    text: str, lowered: str, features: list[tuple[str, int, int]]
) -> None:
    result = lower(text)
    assert result.text == lowered
    assert [(f.what[: len(what)], f.line, f.column) for f, (what, _, _) in zip(result.features, features)] == features
    assert len(result.features) == len(features) and result.kept == ()
    ast.parse(result.text)


def test_what_no_rewrite_of_the_same_length_can_express_is_kept() -> None:
    text = "x = f'{a # count\n}'\ny = f\"{'a'\n}\"\n"
    result = lower(text)
    assert result.text == text
    assert [(f.what, f.line, f.column) for f in result.kept] == [
        ("comment inside an f-string's replacement field", 1, 10),
        ("line break inside a single-quoted f-string", 1, 17),
    ]


def test_an_unterminated_string_leaves_the_text_as_it_is() -> None:
    """What was met before it is kept: the file does not parse, and the parse error names it."""
    text = 'x = f"{d["a"]}"\ny = "open\n'
    result = lower(text)
    assert result.text == text
    assert [(f.what, f.line, f.column) for f in result.kept] == [
        ("f-string reusing its quotes inside a replacement field", 1, 10)
    ]


# -- the cost: files that parse are never lowered

REPOSITORY_FILES = sorted(
    path for folder in ("pitfall_lint", "tests", "fixtures", "bench") for path in (REPO / folder).rglob("*.py")
    if path.parent != NEWER
)


def test_the_checked_files_that_parse_are_never_lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str) -> None:
        raise AssertionError("lowered a file that parses")

    monkeypatch.setattr(lowering, "lower", refuse)
    engine = Engine(all_rules())
    for path in REPOSITORY_FILES:
        result = engine.check_source(str(path), path.read_bytes())
        assert result.internal_error is None, (path, result.internal_error)


def test_lowering_a_file_that_parses_changes_nothing() -> None:
    for path in REPOSITORY_FILES:
        text = path.read_text(encoding="utf-8")
        assert lower(text).text == text and lower(text).features == (), path
