"""`rules` and `explain` work from a built wheel, which carries the documents of rules/ and the first-run figures."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from marks import REPO


def test_wheel_ships_the_rule_documents(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(REPO)],
        check=True, capture_output=True, text=True,
    )
    (wheel,) = tmp_path.glob("pitfall_lint-*.whl")
    documents = sorted(p.name for p in (REPO / "rules").glob("PFL*.md"))
    with zipfile.ZipFile(wheel) as archive:
        shipped = sorted(Path(n).name for n in archive.namelist() if n.startswith("pitfall_lint/_docs/"))
        archive.extractall(tmp_path / "site")
    assert documents and shipped == documents
    # Run from the unpacked wheel, far from the checkout, so only the shipped copies can be found.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "explain", "PFL301"],
        cwd=elsewhere, env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (REPO / "rules" / "PFL301-missing-main-guard.md").read_text()
    # `rules` quotes the first-run figures of pitfall_lint/first_run.json: the wheel carries them too.
    shipped_rules = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "rules"],
        cwd=elsewhere, env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=False,
    )
    checkout_rules = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "rules"], cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )
    assert (shipped_rules.returncode, shipped_rules.stdout) == (0, checkout_rules.stdout)
