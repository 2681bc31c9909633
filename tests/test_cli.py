"""The command line: default command, formats, selection, exit codes, noqa, configuration, rules, explain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint.cli import main

SAVE = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\n"
SPAWN = "import torch.multiprocessing as mp\ndef w(i):\n    pass\nmp.spawn(w, nprocs=2)\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "save.py").write_text(SAVE)
    (tmp_path / "spawn.py").write_text(SPAWN)
    (tmp_path / "clean.py").write_text("import torch.nn as nn\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def codes(result) -> set[tuple[str, str, int]]:
    return {(d["path"], d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"]}


def test_default_command_is_check_of_the_current_folder(project: Path) -> None:
    result = run()
    assert result.exit_code == 1
    # save.py's torch.save is PFL201's, a preview rule since 2026-11-25: what a user meets by default leaves it out.
    assert result.stdout.splitlines() == [
        "spawn.py:4:1: PFL301 [*] `torch.multiprocessing.spawn` starts processes at import time with the spawn start "
        "method, on every platform: each child re-imports the module, reaches it again and fails while bootstrapping; "
        'move it under `if __name__ == "__main__":`',
        "Found 1 diagnostic in 1 of 3 files checked.",
        "[*] 1 fixable with `--fix`.",
    ]
    assert run("save.py").stdout == "All checks passed! (1 file checked)\n"
    assert run("--preview", "save.py").exit_code == 1
    assert run("check", "clean.py").stdout == "All checks passed! (1 file checked)\n"
    assert run("check", "--preview", "save.py").stdout.splitlines()[1:] == [
        "Found 1 diagnostic in 1 of 1 file checked.", "1 unsafe fix available with `--fix --unsafe-fixes`."
    ]
    assert run("check", "clean.py").exit_code == 0


def test_json_document(project: Path) -> None:
    from pitfall_lint.rules.unguarded_torch_save import UnguardedTorchSave

    document = json.loads(run("check", "--preview", "--format", "json", "save.py").stdout)
    assert document["version"]
    assert document["diagnostics"] == [
        {
            "code": "PFL201",
            "name": "unguarded-torch-save",
            "path": "save.py",
            "cell": None,
            "line": 4,
            "column": 1,
            "end_line": 4,
            "end_column": 23,
            "severity": "error",
            "message": document["diagnostics"][0]["message"],
            "fix": {"applicability": "unsafe", "message": UnguardedTorchSave.info.hint},
            "related": [],
        }
    ]


def test_github_annotations(project: Path) -> None:
    result = run("check", "--format", "github", "spawn.py")
    (line,) = result.stdout.splitlines()
    assert line.startswith(
        "::error file=spawn.py,line=4,col=1,endLine=4,endColumn=22,title=PFL301 missing-main-guard::PFL301 "
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--select", "PFL2"], {"PFL201"}),
        (["--select", "PFL201,PFL301"], {"PFL201", "PFL301"}),
        (["--ignore", "PFL3"], {"PFL201"}),
        (["--select", "ALL", "--ignore", "PFL201"], {"PFL301"}),
        (["--select", "PFL1"], set()),
    ],
)
def test_select_and_ignore_by_code_or_prefix(project: Path, args: list[str], expected: set[str]) -> None:
    result = run("check", "--preview", "--format", "json", *args)
    assert {code for _, code, _ in codes(result)} == expected
    assert result.exit_code == (1 if expected else 0)


def test_exit_zero(project: Path) -> None:
    assert run("check", "--exit-zero").exit_code == 0


def test_unknown_code_on_the_command_line(project: Path) -> None:
    result = run("check", "--select", "PFL9")
    assert result.exit_code == 2
    assert result.stderr == "error: --select: 'PFL9' matches no rule code\n"


@pytest.mark.parametrize(
    ("comment", "suppressed"),
    [("# noqa: PFL201", True), ("# noqa", True), ("#noqa:PFL301,PFL201", True), ("# noqa: PFL301", False)],
)
def test_noqa(project: Path, comment: str, suppressed: bool) -> None:
    (project / "save.py").write_text(SAVE.replace("'c.pt')\n", f"'c.pt')  {comment}\n"))
    assert bool(codes(run("check", "--preview", "--format", "json", "save.py"))) is not suppressed


def write_config(project: Path, body: str) -> None:
    (project / "pyproject.toml").write_text(f"[project]\nname = 'x'\n\n[tool.pitfall-lint]\n{body}\n")


def test_configuration_select_ignore_and_per_file_ignores(project: Path) -> None:
    write_config(project, 'ignore = ["PFL301"]\n[tool.pitfall-lint.per-file-ignores]\n"sub/*.py" = ["PFL201"]')
    (project / "sub").mkdir()
    (project / "sub" / "save.py").write_text(SAVE)
    assert codes(run("check", "--preview", "--format", "json")) == {("save.py", "PFL201", 4)}


def test_configuration_is_found_from_a_subfolder(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(project, 'select = ["PFL3"]')
    (project / "sub").mkdir()
    (project / "sub" / "spawn.py").write_text(SPAWN)
    monkeypatch.chdir(project / "sub")
    assert codes(run("check", "--format", "json")) == {("spawn.py", "PFL301", 4)}


def test_command_line_select_overrides_configuration(project: Path) -> None:
    write_config(project, 'select = ["PFL3"]')
    assert {c for _, c, _ in codes(run("check", "--preview", "--format", "json", "--select", "PFL2"))} == {"PFL201"}


def test_configured_exclude_and_default_exclusions(project: Path) -> None:
    write_config(project, 'exclude = ["generated", "spawn.py"]')
    for folder in ("generated", ".venv", "build", "myenv"):
        (project / folder).mkdir()
        (project / folder / "save.py").write_text(SAVE)
    (project / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    assert codes(run("check", "--preview", "--format", "json")) == {("save.py", "PFL201", 4)}
    # A file named on the command line is checked unless --force-exclude (what pre-commit passes).
    assert codes(run("check", "--format", "json", "spawn.py")) == {("spawn.py", "PFL301", 4)}
    assert codes(run("check", "--format", "json", "--force-exclude", "spawn.py")) == set()


def test_exclude_option(project: Path) -> None:
    assert codes(run("check", "--format", "json", "--exclude", "save.py")) == {("spawn.py", "PFL301", 4)}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('selekt = ["PFL1"]', "[tool.pitfall-lint] unknown key 'selekt'"),
        ('select = "PFL1"', "[tool.pitfall-lint] select: expected a list of strings, got 'PFL1'"),
        ('ignore = ["XYZ1"]', "[tool.pitfall-lint] ignore: 'XYZ1' matches no rule code"),
        ("select = [", "invalid TOML"),
        ('per-file-ignores = ["x"]', "per-file-ignores: expected a table"),
        ('[tool.pitfall-lint.per-file-ignores]\n"a.py" = ["PFL9"]', "per-file-ignores.a.py: 'PFL9' matches no rule code"),
    ],
)
def test_bad_configuration_is_a_one_line_error(project: Path, body: str, message: str) -> None:
    write_config(project, body)
    result = run("check")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert "pyproject.toml" in result.stderr


def test_explicit_config_file(project: Path) -> None:
    (project / "other.toml").write_text('[tool.pitfall-lint]\nselect = ["PFL3"]\n')
    assert {c for _, c, _ in codes(run("check", "--format", "json", "--config", "other.toml"))} == {"PFL301"}


def test_rules_lists_every_rule() -> None:
    from pitfall_lint.rules import all_rules

    rows = json.loads(run("rules", "--format", "json").stdout)
    assert [r["code"] for r in rows] == ["PFL000", "PFL001", "PFL002", *(rule.info.code for rule in all_rules())]
    assert set(rows[0]) == {"code", "name", "summary", "severity", "enabled_by_default", "verifiable", "fix", "preview", "first_run"}
    text = run("rules").stdout.splitlines()
    assert text[0].split() == ["code", "name", "default", "severity", "verify", "fix", "state", "first", "run", "summary"]
    catalog = {tuple(line.split()[:7]) for line in text[1:]}  # up to the state: on, off, or preview
    assert catalog == {
        ("PFL000", "parse-error", "on", "error", "no", "-", "on"),
        ("PFL001", "unused-suppression", "on", "warning", "no", "-", "on"),
        ("PFL002", "invalid-suppression", "on", "warning", "no", "-", "on"),
        ("PFL101", "bound-method-on-module", "on", "warning", "yes", "-", "on"),
        ("PFL102", "pad-packed-without-total-length", "on", "warning", "yes", "safe", "on"),
        ("PFL103", "dp-scatter-dim-mismatch", "on", "warning", "yes", "-", "on"),
        ("PFL104", "dp-state-mutation-in-forward", "on", "warning", "yes", "-", "on"),
        ("PFL105", "dp-scalar-or-non-tensor-output", "on", "warning", "yes", "-", "on"),
        ("PFL106", "compile-with-data-parallel", "on", "error", "yes", "-", "on"),
        ("PFL110", "batch-smaller-than-replicas", "on", "warning", "yes", "-", "on"),
        ("PFL201", "unguarded-torch-save", "on", "error", "yes", "unsafe", "preview"),
        ("PFL202", "load-without-map-location", "off", "warning", "yes", "unsafe", "off"),
        ("PFL203", "wrapped-state-dict", "on", "warning", "yes", "-", "on"),
        ("PFL204", "load-without-barrier", "on", "warning", "yes", "-", "on"),
        ("PFL205", "ddp-unused-parameters", "on", "error", "yes", "-", "on"),
        ("PFL207", "rank-divergent-collective", "on", "error", "yes", "-", "on"),
        ("PFL208", "ddp-module-bypass", "on", "error", "yes", "-", "on"),
        ("PFL210", "ddp-wrap-order", "on", "error", "yes", "-", "on"),
        ("PFL211", "reentrant-checkpoint-with-ddp", "on", "error", "yes", "-", "on"),
        ("PFL212", "wrapper-attribute-without-module", "on", "error", "yes", "-", "on"),
        ("PFL213", "compiled-state-dict-prefix", "on", "warning", "no", "-", "preview"),
        ("PFL214", "rank-divergent-loop-exit", "on", "error", "no", "-", "preview"),
        ("PFL301", "missing-main-guard", "on", "error", "yes", "safe", "on"),
        ("PFL302", "spawn-signature", "on", "error", "yes", "-", "on"),
        ("PFL305", "rank-vs-local-rank", "on", "warning", "yes", "-", "preview"),
        ("PFL306", "hardcoded-master-port", "on", "warning", "yes", "-", "preview"),
        ("PFL307", "legacy-local-rank-argument", "on", "warning", "yes", "-", "on"),
        ("PFL308", "spawn-from-notebook", "on", "error", "yes", "-", "on"),
        ("PFL401", "missing-distributed-sampler", "on", "warning", "yes", "-", "on"),
        ("PFL402", "missing-set-epoch", "on", "warning", "yes", "safe", "on"),
        ("PFL404", "rank-seeding", "on", "warning", "yes", "-", "on"),
        ("PFL501", "optimizer-before-move", "off", "info", "no", "-", "off"),
        ("PFL502", "softmax-before-cross-entropy", "on", "error", "no", "-", "on"),
        ("PFL503", "missing-zero-grad", "on", "error", "no", "-", "preview"),
        ("PFL601", "tied-weights-in-separate-shards", "on", "error", "yes", "-", "preview"),
        ("PFL602", "deepcopy-of-sharded-module", "on", "error", "yes", "-", "preview"),
        ("PFL603", "unregistered-forward-method", "on", "error", "yes", "-", "preview"),
        ("PFL604", "fsdp1-api-on-fully-shard", "on", "error", "yes", "-", "preview"),
        ("PFL605", "clip-grad-norm-mixed-dtensor", "on", "error", "yes", "-", "preview"),
        ("PFL606", "optimizer-before-fully-shard", "on", "error", "no", "-", "preview"),
        ("PFL607", "device-mesh-under-rank-guard", "on", "error", "no", "-", "preview"),
    }


@pytest.mark.parametrize("spelling", ["PFL101", "pfl101", "bound-method-on-module"])
def test_explain_prints_the_rule_document(spelling: str) -> None:
    result = run("explain", spelling)
    assert result.exit_code == 0
    assert result.stdout.startswith("# PFL101 bound-method-on-module")
    assert "## Why is this bad?" in result.stdout


def test_every_rule_has_a_document() -> None:
    for row in json.loads(run("rules", "--format", "json").stdout):
        result = run("explain", row["code"])
        assert result.exit_code == 0, result.stderr
        assert result.stdout.startswith(f"# {row['code']} {row['name']}")


def test_explain_unknown_rule() -> None:
    result = run("explain", "PFL999")
    assert result.exit_code == 2
    assert result.stderr == "error: unknown rule 'PFL999'; `pitfall-lint rules` lists them\n"


@pytest.mark.parametrize(
    ("args", "command"),
    [(["chek"], "check"), (["verfy", "train.py"], "verify"), (["rule"], "rules"), (["explian", "PFL101"], "explain")],
)
def test_a_misspelt_command_is_named_not_checked_as_a_path(project: Path, args: list[str], command: str) -> None:
    result = run(*args)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: unknown command '{args[0]}'; did you mean '{command}'?\n"


def test_a_word_that_names_a_file_or_is_far_from_every_command_is_a_path(project: Path) -> None:
    assert run("chek").stderr == "error: unknown command 'chek'; did you mean 'check'?\n"
    (project / "chek").write_text("#!/usr/bin/env python\nimport torch\n")  # a script: named, it is checked as Python
    result = run("chek")
    assert (result.exit_code, result.stderr, result.stdout) == (0, "", "All checks passed! (1 file checked)\n")
    result = run("train")
    assert (result.exit_code, result.stderr) == (2, "error: train: no such file or directory\n")


@pytest.mark.parametrize(("args", "usage"), [(["help"], "[OPTIONS] COMMAND [ARGS]..."), (["help", "check"], "check [OPTIONS] [PATHS]...")])
def test_help_shows_the_help_of_the_program_or_of_the_command(project: Path, args: list[str], usage: str) -> None:
    result = run(*args)
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.splitlines()[0] == f"Usage: main {usage}"  # the test runner calls the program `main`
    assert result.stdout == run(*args[1:], "--help").stdout
