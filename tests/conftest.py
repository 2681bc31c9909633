import sys
from pathlib import Path

# The tests share small helpers (tests/marks.py) without being a package.
sys.path.insert(0, str(Path(__file__).resolve().parent))
