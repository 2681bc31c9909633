"""Loaded by every Python process of a verify run (PYTHONPATH), ranks and spawned children included."""

import os

if os.environ.get("PITFALL_LINT_TRACE_DIR"):
    from pitfall_lint.harness.child.instrument import arm

    arm()
