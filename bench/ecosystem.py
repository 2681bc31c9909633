"""Every rule over real repositories: what each finds there, and whether each finding is real.

    python bench/ecosystem.py CORPUS_DIR... [--select PFL205,PFL207] [--update] [--table]

Each CORPUS_DIR is a repository fetched for measurement (never committed), named by its folder; the
repositories used, with their commits and kinds, are listed in bench/ecosystem-repos.json. Each is checked
as `pitfall-lint check --select ALL .` would check it there (every rule, off-by-default ones too, each file
against its project). Printed: findings per rule per repository, what changed against the stored summary,
every finding of a rule that is on by default that has no verdict yet, and precision per rule.

Verdicts are written by hand, one file per rule: bench/ecosystem-verdicts/PFLxxx.json maps a finding's
fingerprint (a hash of path, code and flagged source; no third-party code) to
{"verdict": "true" | "false", "where": "repo/path:line", "evidence": "one line"}. `--update` rewrites
bench/ecosystem-summary.json: every finding with its place and its verdict. `--table` prints the table
for the README and the notes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pitfall_lint.baseline import fingerprint  # noqa: E402
from pitfall_lint.checking import ProjectSettings, check_paths  # noqa: E402
from pitfall_lint.diagnostic import Diagnostic  # noqa: E402
from pitfall_lint.files import Excluder, discover  # noqa: E402
from pitfall_lint.rules import all_rules  # noqa: E402
from pitfall_lint.rules.base import Rule  # noqa: E402

SUMMARY = REPO / "bench" / "ecosystem-summary.json"
VERDICTS = REPO / "bench" / "ecosystem-verdicts"
MANIFEST = REPO / "bench" / "ecosystem-repos.json"


def check(repository: Path, rules: list[type[Rule]]) -> tuple[int, list[tuple[Diagnostic, str]]]:
    """The number of files and every diagnostic with its fingerprint; paths relative to the repository."""
    cwd = os.getcwd()
    os.chdir(repository)
    try:
        excluder = Excluder([], repository)
        files = [os.path.relpath(f) for f in discover(["."], excluder, lambda message: print(f"warning: {message}", file=sys.stderr))]
        # As `pitfall-lint check --select ALL .` in the repository: each file against its project.
        results = check_paths(files, rules, ProjectSettings(excluder), repository, use_cache=False).results
        for result in results:  # a crash is never a finding: say it, loudly
            if result.internal_error:
                print(f"INTERNAL ERROR {repository.name}/{result.path}: {result.internal_error}", file=sys.stderr)
        found = sorted(d for result in results for d in result.diagnostics if d.code != "PFL000")
        return len(files), [(d, hashlib.blake2b(f"{d.path}\n{fingerprint(d)}".encode(), digest_size=8).hexdigest()) for d in found]
    finally:
        os.chdir(cwd)


def verdicts() -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for path in sorted(VERDICTS.glob("PFL*.json")):
        found.update(json.loads(path.read_text()))
    return found


def commit_of(repository: Path) -> str:
    result = subprocess.run(["git", "-C", str(repository), "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() or "?"


def table(summary: dict, default_on: set[str]) -> str:
    """Markdown: repository, commit, files, findings per rule that found anything (default ones: true/all)."""
    codes = sorted({code for entry in summary.values() for code in entry["findings"]})
    kinds = {e["name"]: e["kind"] for e in json.loads(MANIFEST.read_text())} if MANIFEST.exists() else {}
    header = "| repository (commit) | kind | files | " + " | ".join(c if c in default_on else f"{c}*" for c in codes) + " |"
    rows = [header, "|" + " --- |" * (3 + len(codes))]
    for name, entry in sorted(summary.items(), key=lambda item: item[0].lower()):
        cells = []
        for code in codes:
            findings = entry["findings"].get(code, [])
            true = sum(f["verdict"] == "true" for f in findings)
            cells.append("" if not findings else f"{true}/{len(findings)}" if code in default_on else str(len(findings)))
        rows.append(f"| {name} ({entry['commit']}) | {kinds.get(name, '')} | {entry['files']} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repositories", nargs="*", type=Path)
    parser.add_argument("--update", action="store_true", help="rewrite the summary with this run")
    parser.add_argument("--table", action="store_true", help="print the Markdown table of the summary")
    parser.add_argument("--select", default="", help="only these codes (comma-separated): a quicker look; implies no --update")
    options = parser.parse_args()
    chosen = [code.strip() for code in options.select.split(",") if code.strip()]
    if chosen and options.update:
        parser.error("--update records every rule: leave out --select")
    stored: dict = json.loads(SUMMARY.read_text()) if SUMMARY.exists() else {}
    rules = [rule for rule in all_rules() if not rule.runtime_only and (not chosen or rule.info.code in chosen)]
    default_on = {rule.info.code for rule in rules if rule.info.enabled_by_default}
    known = verdicts()
    current: dict[str, dict] = {}
    changes: list[str] = []
    unjudged: list[str] = []
    if options.repositories:
        print(f"{'repository':<28}" + "".join(f"{r.info.code[3:]:>5}" for r in rules) + "  (PFL codes)")
    for repository in options.repositories:
        name = repository.resolve().name
        files, found = check(repository.resolve(), list(rules))
        counts = Counter(d.code for d, _ in found)
        print(f"{name:<28}" + "".join(f"{counts.get(r.info.code, 0):>5}" for r in rules))
        findings: dict[str, list[dict]] = {}
        for d, print_ in found:
            verdict = known.get(print_, {})
            findings.setdefault(d.code, []).append(
                {
                    "fingerprint": print_, "path": d.path, "line": d.line, "message": d.message,
                    "verdict": verdict.get("verdict"), "evidence": verdict.get("evidence"),
                }
            )
            if d.code in default_on and not verdict:
                unjudged.append(f"  {print_} {name}/{d.path}:{d.line}: {d.code} {d.message}")
        current[name] = {"commit": commit_of(repository), "files": files, "findings": findings}
        before = stored.get(name, {}).get("findings", {})
        for code in sorted(set(before) | set(findings)):
            old = Counter(f["fingerprint"] for f in before.get(code, []))
            new = Counter(f["fingerprint"] for f in findings.get(code, []))
            added, removed = new - old, old - new
            if added or removed:
                changes.append(f"{name} {code}: +{sum(added.values())} -{sum(removed.values())}")
                changes += [f"    + {name}/{f['path']}:{f['line']}" for f in findings.get(code, []) if f["fingerprint"] in added]
                changes += [f"    - {name}/{f['path']}:{f['line']}" for f in before.get(code, []) if f["fingerprint"] in removed]
    if options.repositories:
        print("\n".join(["against the summary:", *changes]) if changes else "no change against the summary")
        print("\n".join([f"default findings without a verdict ({len(unjudged)}):", *unjudged]) if unjudged else "every default finding has a verdict")
    summary = {**stored, **current}
    precision: dict[str, Counter] = {}
    for entry in summary.values():
        for code, findings in entry["findings"].items():
            if code in default_on:
                precision.setdefault(code, Counter()).update(f["verdict"] or "unjudged" for f in findings)
    for code in sorted(precision):
        c = precision[code]
        print(f"{code}: {c['true']} true, {c['false']} false, {c['unjudged']} unjudged")
    total = sum(precision.values(), Counter())
    if total["true"] + total["false"]:
        print(f"default findings: {total['true']} true of {total['true'] + total['false']} judged ({100 * total['true'] / (total['true'] + total['false']):.0f} %)")
    if options.update:
        SUMMARY.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
        print(f"summary written: {SUMMARY}")
    if options.table:
        print(table(summary, default_on))


if __name__ == "__main__":
    main()
