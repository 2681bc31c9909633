"""Multi-file fixture projects: each reports exactly its `# expect:` marks, with evidence from the other files,
and a file checked alone (what pre-commit runs) gets what the whole-project run gives it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from marks import REPO, expected, inside
from pitfall_lint.cli import main

PROJECTS = sorted(p.parent for p in (REPO / "fixtures" / "projects").glob("*/*/pyproject.toml"))



def check(*arguments: str, cwd: Path = REPO) -> dict:
    with inside(cwd):
        result = CliRunner().invoke(main, ["check", "--preview", "--select", "ALL", "--format", "json", *arguments], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def marks_of(project: Path) -> set[tuple[str, str, int]]:
    return {
        (str(f.relative_to(REPO)), code, line) for f in sorted(project.rglob("*.py")) for code, line in expected(f.read_text())
    }


def found(document: dict) -> set[tuple[str, str, int]]:
    return {(d["path"], d["code"], d["line"]) for d in document["diagnostics"]}


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_project_reports_exactly_its_marks(project: Path) -> None:
    marks = marks_of(project)
    assert bool(marks) == (project.name == "bad"), "bad projects mark findings, clean ones none"
    assert found(check("--no-cache", str(project.relative_to(REPO)))) == marks


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_file_alone_gets_what_the_whole_project_run_gives_it(project: Path) -> None:
    whole = check("--no-cache", str(project.relative_to(REPO)))["diagnostics"]
    for source in sorted(project.rglob("*.py")):
        path = str(source.relative_to(REPO))
        alone = check("--no-cache", path)["diagnostics"]
        assert alone == [d for d in whole if d["path"] == path], path


def test_evidence_from_another_file_is_in_the_message_and_the_related_places() -> None:
    project = "fixtures/projects/imported-module-base/bad"
    (diagnostic,) = check("--no-cache", f"{project}/models/speech.py")["diagnostics"]
    assert diagnostic["message"] == (
        "`pad_packed_sequence` without `total_length`: nn.DataParallel replicas (wrapped by nn.DataParallel at "
        f"{project}/builder.py:10) pad to different lengths and the gather fails; pass `total_length=padded.size(1)`"
    )
    assert diagnostic["related"] == [{"path": f"{project}/builder.py", "line": 10, "message": "wrapped by nn.DataParallel"}]
    (guard,) = check("--no-cache", "fixtures/projects/guard-in-caller/bad/utils/io.py")["diagnostics"]
    assert guard["related"] == [
        {"path": "fixtures/projects/guard-in-caller/bad/train.py", "line": 25, "message": "called on every rank"}
    ]


def test_sarif_carries_the_evidence_as_related_locations() -> None:
    runner = CliRunner()
    result = runner.invoke(
        main, ["check", "--no-cache", "--format", "sarif", "fixtures/projects/checkpoint-provenance/bad/export.py"]
    )
    (sarif_result,) = json.loads(result.stdout)["runs"][0]["results"]
    assert sarif_result["relatedLocations"] == [
        {
            "id": 1,
            "physicalLocation": {
                "artifactLocation": {"uri": "fixtures/projects/checkpoint-provenance/bad/train.py", "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": 19},
            },
            "message": {"text": "saved from a wrapper"},
        }
    ]


def test_show_source_points_at_the_evidence_too() -> None:
    result = CliRunner().invoke(
        main, ["check", "--no-cache", "--show-source", "fixtures/projects/dataparallel-reach/bad/models/net.py"]
    )
    assert "= note: wrapped by nn.DataParallel at fixtures/projects/dataparallel-reach/bad/train.py:12" in result.stdout


def test_a_cached_result_is_dropped_when_another_file_changes_its_answer(tmp_path: Path) -> None:
    """models/net.py is unchanged, but train.py moves from DataParallel to DDP: the cached PFL101 must go."""
    project = tmp_path / "project"
    shutil.copytree(REPO / "fixtures" / "projects" / "dataparallel-reach" / "bad", project)
    assert found(check("models/net.py", cwd=project)) == {("models/net.py", "PFL101", 12)}
    assert found(check("models/net.py", cwd=project)) == {("models/net.py", "PFL101", 12)}  # from the cache
    train = project / "train.py"
    train.write_text(train.read_text().replace("nn.DataParallel(model)", "nn.parallel.DistributedDataParallel(model)"))
    assert found(check("models/net.py", cwd=project)) == set()
    assert found(check(cwd=project)) == set()


def test_a_cached_result_is_dropped_when_the_pinned_framework_changes(tmp_path: Path) -> None:
    """No Python file changes, only requirements.txt: Lightning pinned back from 2.2 to 1.5, whose save_checkpoint
    has no barrier. The project's fingerprint holds its dependency files, so the cached PFL207 goes."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("")
    (project / "requirements.txt").write_text("lightning==2.2.1\n")
    (project / "train.py").write_text(
        "import lightning.pytorch as pl\ndef end(trainer):\n    if trainer.is_global_zero:\n"
        "        trainer.save_checkpoint('last.ckpt')\n"
    )
    assert found(check(cwd=project)) == {("train.py", "PFL207", 4)}
    assert found(check(cwd=project)) == {("train.py", "PFL207", 4)}  # from the cache
    (project / "requirements.txt").write_text("lightning==1.5.10\n")
    assert found(check(cwd=project)) == set()


def test_project_root_option_and_the_setting(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(REPO / "fixtures" / "projects" / "dataparallel-reach" / "clean", project)
    (project / "pyproject.toml").unlink()
    net = "models/net.py"
    # With the models folder as the root, nothing there trains: a library's module, reported.
    assert found(check("--project-root", "models", net, cwd=project)) == {(net, "PFL101", 12)}
    # The real project trains with DDP only.
    assert found(check("--project-root", ".", net, cwd=project)) == set()
    (project / "pyproject.toml").write_text('[tool.pitfall-lint]\ndata-parallel = "always"\n')
    assert found(check(net, cwd=project)) == {(net, "PFL101", 12)}
    (project / "pyproject.toml").write_text('[tool.pitfall-lint]\ndata-parallel = "sometimes"\n')
    with inside(project):
        result = CliRunner().invoke(main, ["check", net])
    assert result.exit_code == 2
    assert result.output.strip().endswith(
        "data-parallel: expected one of 'auto', 'always', 'never', got 'sometimes'"
    )
