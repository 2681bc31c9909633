"""Baselines: today's findings recorded, only new ones reported, robust to edits that shift lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint.cli import main

SETUP = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "train.py").write_text(SETUP + "torch.save({}, 'old.pt')\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(*args: str):
    # --preview: the example finding is PFL201's, a preview rule since 2026-11-25.
    return CliRunner().invoke(main, ["check", "--no-cache", "--preview", "--format", "json", *args], catch_exceptions=False)


def found(result) -> list[tuple[str, int]]:
    return [(d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"]]


def test_baseline_survives_edits_that_shift_lines(project: Path) -> None:
    written = check("--write-baseline", "baseline.json")
    assert (written.exit_code, written.stderr) == (0, "Recorded 1 finding in baseline.json.\n")
    entries = json.loads((project / "baseline.json").read_text())["findings"]
    assert [(e["code"], e["path"], e["line"]) for e in entries] == [("PFL201", "train.py", 4)]
    # Unrelated lines above the finding move it down: it stays known.
    (project / "train.py").write_text("# a header\n\n" + SETUP + "torch.save({}, 'old.pt')\n")
    result = check("--baseline", "baseline.json")
    assert (result.exit_code, found(result)) == (0, [])
    # A new finding is reported; so is a second copy of the known one.
    (project / "train.py").write_text(SETUP + "torch.save({}, 'old.pt')\ntorch.save({}, 'new.pt')\ntorch.save({}, 'old.pt')\n")
    result = check("--baseline", "baseline.json")
    assert (result.exit_code, found(result)) == (1, [("PFL201", 5), ("PFL201", 6)])


def test_changing_the_flagged_line_makes_it_new(project: Path) -> None:
    check("--write-baseline", "baseline.json")
    (project / "train.py").write_text(SETUP + "torch.save({}, 'renamed.pt')\n")
    assert found(check("--baseline", "baseline.json")) == [("PFL201", 4)]


@pytest.mark.parametrize("content", ["{not json", '{"findings": [{"code": 1}]}'])
def test_bad_baseline_is_a_one_line_error(project: Path, content: str) -> None:
    (project / "baseline.json").write_text(content)
    result = check("--baseline", "baseline.json")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: baseline.json: not a pitfall-lint baseline")
    assert len(result.stderr.splitlines()) == 1


def test_missing_baseline(project: Path) -> None:
    result = check("--baseline", "nowhere.json")
    assert (result.exit_code, result.stderr) == (2, "error: nowhere.json: cannot read the baseline: No such file or directory\n")


def test_paths_are_relative_to_the_baseline_so_any_working_folder_keeps_it(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "pkg").mkdir()
    (project / "train.py").rename(project / "pkg" / "train.py")
    (project / "pkg" / "other.py").write_text(SETUP + "torch.save({}, 'a.pt')\ntorch.save({}, 'b.pt')\n")
    monkeypatch.chdir(project / "pkg")  # written from a subfolder, into the folder above
    written = check("--write-baseline", "../baseline.json")
    assert (written.exit_code, written.stderr) == (0, "Recorded 3 findings in ../baseline.json.\n")
    entries = json.loads((project / "baseline.json").read_text())
    assert entries["version"] == 2
    assert [(e["path"], e["line"]) for e in entries["findings"]] == [("pkg/other.py", 4), ("pkg/other.py", 5), ("pkg/train.py", 4)]
    for folder, baseline in ((project, "baseline.json"), (project / "pkg", "../baseline.json")):
        monkeypatch.chdir(folder)
        result = check("--baseline", baseline)
        assert (result.exit_code, found(result)) == (0, []), folder
        text = CliRunner().invoke(main, ["check", "--no-cache", "--preview", "--baseline", baseline], catch_exceptions=False)
        assert text.stdout == "All checks passed! (2 files checked; 3 findings hidden by the baseline)\n"
    (project / "pkg" / "train.py").write_text(SETUP + "torch.save({}, 'old.pt')\ntorch.save({}, 'new.pt')\n")
    text = CliRunner().invoke(main, ["check", "--no-cache", "--preview", "--baseline", "../baseline.json"], catch_exceptions=False)
    assert text.exit_code == 1
    assert text.stdout.splitlines()[-2:] == [
        "Found 1 diagnostic in 1 of 2 files checked; 3 findings hidden by the baseline.",
        "1 unsafe fix available with `--fix --unsafe-fixes`.",
    ]


def test_a_format_1_baseline_is_still_read_relative_to_the_working_folder(project: Path) -> None:
    check("--write-baseline", "baseline.json")
    document = json.loads((project / "baseline.json").read_text())
    (project / "baseline.json").write_text(json.dumps({**document, "version": 1}))
    result = check("--baseline", "baseline.json")
    assert (result.exit_code, found(result)) == (0, [])


def test_an_unknown_baseline_format_is_a_one_line_error(project: Path) -> None:
    (project / "baseline.json").write_text('{"version": 7, "findings": []}')
    result = check("--baseline", "baseline.json")
    assert (result.exit_code, result.stderr) == (
        2, "error: baseline.json: baseline format 7 is not one this version reads (1 or 2): write it again\n"
    )


def test_entries_no_longer_found_are_counted_on_stderr(project: Path) -> None:
    (project / "train.py").write_text(SETUP + "torch.save({}, 'a.pt')\ntorch.save({}, 'b.pt')\ntorch.save({}, 'c.pt')\n")
    check("--write-baseline", "baseline.json")
    result = check("--baseline", "baseline.json")
    assert (result.exit_code, found(result), result.stderr) == (0, [], "")
    (project / "train.py").write_text(SETUP + "torch.save({}, 'b.pt')\n")  # a.pt's and c.pt's fixed
    result = check("--baseline", "baseline.json")
    assert (result.exit_code, found(result)) == (0, [])
    assert result.stderr == (
        "warning: 2 entries of baseline.json are no longer found; --write-baseline baseline.json drops them\n"
    )
    (project / "train.py").write_text(SETUP + "torch.save({}, 'renamed.pt')\n")  # b.pt's changed into a new finding
    result = check("--baseline", "baseline.json")
    assert (result.exit_code, found(result)) == (1, [("PFL201", 4)])
    assert result.stderr == (
        "warning: 3 entries of baseline.json are no longer found; --write-baseline baseline.json drops them\n"
    )
    check("--write-baseline", "baseline.json")
    assert check("--baseline", "baseline.json").stderr == ""


def test_an_entry_of_a_file_or_a_rule_left_out_of_the_run_is_not_stale(project: Path) -> None:
    (project / "other.py").write_text(SETUP + "torch.save({}, 'other.pt')\n")
    check("--write-baseline", "baseline.json")
    (project / "train.py").write_text(SETUP)
    result = check("--baseline", "baseline.json", "train.py")
    assert result.stderr == "warning: 1 entry of baseline.json is no longer found; --write-baseline baseline.json drops it\n"
    assert check("--baseline", "baseline.json", "other.py").stderr == ""  # train.py's entry: not checked
    assert check("--baseline", "baseline.json", "--select", "PFL301").stderr == ""  # PFL201 did not run
