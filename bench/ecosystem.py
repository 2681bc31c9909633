"""Every rule over real repositories, and what a change of the rules adds or removes there.

    python bench/ecosystem.py REPO_DIR... [--summary bench/ecosystem-summary.json] [--update]

Prints the diagnostics per rule per repository, then the difference against the stored summary:
findings that appeared (with their place) and findings that disappeared (counted). The summary holds
counts and fingerprints only (a hash of code, path and the flagged source), never third-party code.
`--update` rewrites it. Repositories are fetched for measurement and passed as folders; a repository
is named by its folder's name.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pitfall_lint.checking import ProjectSettings, check_paths  # noqa: E402
from pitfall_lint.baseline import fingerprint  # noqa: E402
from pitfall_lint.diagnostic import Diagnostic  # noqa: E402
from pitfall_lint.files import Excluder, discover  # noqa: E402
from pitfall_lint.rules import all_rules  # noqa: E402

DEFAULT_SUMMARY = REPO / "bench" / "ecosystem-summary.json"


def check(repository: Path) -> list[tuple[Diagnostic, str]]:
    """Every diagnostic of every rule, with its fingerprint; paths relative to the repository."""
    cwd = os.getcwd()
    os.chdir(repository)
    try:
        excluder = Excluder([], repository)
        files = [os.path.relpath(f) for f in discover(["."], excluder, lambda message: print(f"warning: {message}", file=sys.stderr))]
        # As `pitfall-lint check --select ALL .` in the repository: each file against its project.
        results = check_paths(files, all_rules(), ProjectSettings(excluder), repository, use_cache=False).results
        found = sorted(d for result in results for d in result.diagnostics if d.code != "PFL000")
        return [(d, hashlib.blake2b(f"{d.path}\n{fingerprint(d)}".encode(), digest_size=8).hexdigest()) for d in found]
    finally:
        os.chdir(cwd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repositories", nargs="+", type=Path)
    parser.add_argument("--summary", type=Path, default=DEFAULT_SUMMARY)
    parser.add_argument("--update", action="store_true", help="rewrite the summary with this run")
    options = parser.parse_args()
    stored = json.loads(options.summary.read_text()) if options.summary.exists() else {}
    codes = [rule.info.code for rule in all_rules() if not rule.runtime_only]
    print(f"{'repository':<22}" + "".join(f"{c[3:]:>5}" for c in codes) + "  (PFL codes)")
    current: dict[str, dict[str, dict[str, object]]] = {}
    changes: list[str] = []
    for repository in options.repositories:
        name = repository.resolve().name
        found = check(repository.resolve())
        counts = Counter(d.code for d, _ in found)
        print(f"{name:<22}" + "".join(f"{counts.get(c, 0):>5}" for c in codes))
        current[name] = {
            code: {"count": counts[code], "fingerprints": sorted(p for d, p in found if d.code == code)} for code in sorted(counts)
        }
        before = stored.get(name, {})
        for code in sorted(set(before) | set(current[name])):
            old = Counter(before.get(code, {}).get("fingerprints", []))
            new = Counter(current[name].get(code, {}).get("fingerprints", []))  # type: ignore[union-attr]
            added, removed = new - old, old - new
            if added or removed:
                changes.append(f"{name} {code}: +{sum(added.values())} -{sum(removed.values())}")
                changes += [f"    + {name}/{d.path}:{d.line}" for d, p in found if d.code == code and p in added]
    print("\n".join(["against the summary:", *changes]) if changes else "no change against the summary")
    if options.update:
        options.summary.write_text(json.dumps({**stored, **current}, indent=1, sort_keys=True) + "\n")
        print(f"summary written: {options.summary}")


if __name__ == "__main__":
    main()
