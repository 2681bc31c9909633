"""The GitHub composite action: valid YAML with the inputs the README documents."""

from __future__ import annotations

import yaml

from marks import REPO


def test_action_is_a_composite_with_the_documented_inputs() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) == {"paths", "args", "sarif-file", "upload", "fail-on-findings"}
    readme = (REPO / "README.md").read_text()
    for name in action["inputs"]:
        assert f"`{name}`" in readme, f"README does not document the action input {name}"
    steps = action["runs"]["steps"]
    assert any(step.get("uses", "").startswith("github/codeql-action/upload-sarif@") for step in steps)
    assert all("shell" in step for step in steps if "run" in step)  # composite run steps need a shell
    assert "--format sarif" in next(step["run"] for step in steps if step.get("id") == "check")
