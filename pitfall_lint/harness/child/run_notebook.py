"""`python -m pitfall_lint.harness.child.run_notebook NOTEBOOK`: the code cells, in order, as Jupyter runs them.

One fresh interpreter whose `__main__` has no file, as a kernel's: a spawned worker cannot import a function
defined in the notebook, here as there. Line numbers count in the cells joined (pitfall_lint.notebook).
"""

from __future__ import annotations

import os
import sys
import types

from pitfall_lint.harness.child.events import SCRIPT, emit
from pitfall_lint.harness.child.observe import observed
from pitfall_lint.notebook import read_notebook


def main() -> int:
    path = os.path.abspath(sys.argv[1])
    os.environ[SCRIPT] = path
    with open(path, "rb") as handle:
        notebook = read_notebook(handle.read())
    code = compile(notebook.text, path, "exec")
    kernel = types.ModuleType("__main__", "the notebook's namespace")
    kernel.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = kernel
    sys.argv = [path]
    sys.path[0] = os.path.dirname(path)
    emit("start", mode="notebook")
    with observed(where="notebook"):
        exec(code, kernel.__dict__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
