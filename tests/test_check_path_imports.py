"""The check path never imports torch, libcst or the code it checks: a pre-commit hook must stay cheap and safe."""

from __future__ import annotations

import json
import subprocess
import sys

from marks import REPO

PROBE = r"""
import json, sys
from click.testing import CliRunner
from pitfall_lint.cli import main
result = CliRunner().invoke(main, ["check", "--select", "ALL", "fixtures"])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {"torch", "libcst", "numpy", "bad", "fixed"})
print(json.dumps({"exit": result.exit_code, "heavy": heavy, "output": result.output[-300:]}))
"""


def test_checking_the_fixtures_imports_nothing_heavy() -> None:
    completed = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, check=True)
    outcome = json.loads(completed.stdout)
    assert outcome["exit"] == 1, outcome["output"]  # it did check, and found the fixtures' pitfalls
    assert outcome["heavy"] == []
