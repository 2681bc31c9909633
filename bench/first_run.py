"""First-run precision and recall: the rules on repositories this project has never seen.

    python bench/first_run.py [--since YYYY-MM-DD] [--batch NAME] [--json] [--log DIR] [--write]

The ecosystem check (bench/ecosystem.py) measures repositories the rules were tuned on, so it flatters them.
The first-run loop measures what a new user meets instead: a repository never used by this project is checked
once with the rules of the day, every finding of a rule on by default is judged by reading the code (true,
false, or debatable, with one line of evidence), and the real pitfalls a default rule covers but did not report
are logged as misses. Each repository is one file, bench/fresh/<name>.json (bench/fresh/README.md has the
format), and enters the log once: once rules are tuned on it, it joins bench/ecosystem-repos.json instead.

Printed per rule, over the rules that run by default today ("default": on by default and not in preview, the figure
a user meets) and over all rules ("all"): findings, true, false, debatable, misses, precision = true / (true + false)
and recall = true / (true + misses); debatable findings count in neither. `--since` keeps the repositories checked
on or after a date, `--batch` those of one named batch (an entry's "batch"): the proof batch, checked after the
last change to a rule and never seen by the changes it measures. `--write`
records the whole log's figures in pitfall_lint/first_run.json, where `pitfall-lint rules` reads them and the
maturity test holds every rule on by default to its bar (pitfall_lint/maturity.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from collections import Counter
from pathlib import Path

LOG = Path(__file__).resolve().parent / "fresh"
INSTALLED = Path(__file__).resolve().parents[1] / "pitfall_lint" / "first_run.json"
KINDS = {"research", "template", "framework", "llm-finetune", "fsdp2", "tutorial"}
VERDICTS = ("true", "false", "debatable")
COLUMNS = ("findings", "true", "false", "debatable", "misses")


class LogError(Exception):
    """A log file that cannot be counted: its name and what is wrong."""


def read_entry(path: Path) -> dict:
    """One repository's log, checked for what the figures rely on."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LogError(f"{path}: cannot read it as JSON ({error})") from None
    if not isinstance(entry, dict):
        raise LogError(f"{path}: not a JSON object")
    for key in ("repo", "commit", "checked_on", "kind", "findings", "misses"):
        if key not in entry:
            raise LogError(f"{path}: no {key!r}")
    if not re.fullmatch(r"[0-9a-f]{40}", str(entry["commit"])):
        raise LogError(f"{path}: 'commit' is not 40 hex digits")
    try:
        datetime.date.fromisoformat(str(entry["checked_on"]))
    except ValueError:
        raise LogError(f"{path}: 'checked_on' is not a YYYY-MM-DD date") from None
    if entry["kind"] not in KINDS:
        raise LogError(f"{path}: 'kind' is {entry['kind']!r}, not one of {', '.join(sorted(KINDS))}")
    for index, finding in enumerate(entry["findings"]):
        if not isinstance(finding, dict) or finding.get("verdict") not in VERDICTS or "code" not in finding:
            raise LogError(f"{path}: finding {index} needs a 'code' and a 'verdict' of {', '.join(VERDICTS)}")
    for index, miss in enumerate(entry["misses"]):
        if not isinstance(miss, dict) or "code" not in miss:
            raise LogError(f"{path}: miss {index} needs a 'code'")
    return entry


def read_log(folder: Path, since: datetime.date | None, batch: str | None = None) -> list[dict]:
    """Every repository of the log checked on or after `since` and of `batch` (when given); a repository logged
    twice is an error."""
    entries: list[dict] = []
    seen: dict[str, Path] = {}
    if not folder.is_dir():
        raise LogError(f"{folder}: no such folder")
    for path in sorted(folder.glob("*.json")):
        entry = read_entry(path)
        if entry["repo"] in seen:
            raise LogError(f"{path}: {entry['repo']} is already logged in {seen[entry['repo']].name}: a repository enters once")
        seen[entry["repo"]] = path
        if since is not None and datetime.date.fromisoformat(entry["checked_on"]) < since:
            continue
        if batch is None or entry.get("batch") == batch:
            entries.append(entry)
    return entries


def ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def default_codes() -> frozenset[str]:
    """The rules a plain `pitfall-lint check` runs: on by default and not in preview."""
    from pitfall_lint.selection import rule_infos

    return frozenset(info.code for info in rule_infos() if info.enabled_by_default and not info.preview)


def figures(entries: list[dict]) -> dict[str, dict[str, float | int | None]]:
    """Counts, precision and recall per rule, over the rules run by default under "default", over all under "all"."""
    counts: dict[str, Counter] = {}
    for entry in entries:
        for finding in entry["findings"]:
            counts.setdefault(finding["code"], Counter()).update(["findings", finding["verdict"]])
        for miss in entry["misses"]:
            counts.setdefault(miss["code"], Counter()).update(["misses"])
    rows = {code: counts[code] for code in sorted(counts)}
    defaults = default_codes()
    rows["default"] = sum((c for code, c in counts.items() if code in defaults), Counter())
    rows["all"] = sum(counts.values(), Counter())
    return {
        code: {
            **{column: c[column] for column in COLUMNS},
            "precision": ratio(c["true"], c["true"] + c["false"]),
            "recall": ratio(c["true"], c["true"] + c["misses"]),
        }
        for code, c in rows.items()
    }


def installed(entries: list[dict]) -> str:
    """The figures the tool ships, per rule and "all": judged counts the findings judged true or false (what
    precision is over), so a debatable finding is in neither."""
    return json.dumps(
        {
            code: {
                "repositories": len(entries),
                "judged": row["true"] + row["false"],
                **{key: row[key] for key in ("true", "false", "debatable", "misses", "precision", "recall")},
            }
            for code, row in figures(entries).items()
        },
        indent=1,
    ) + "\n"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f} %"


def table(entries: list[dict], rows: dict[str, dict]) -> str:
    names = ", ".join(sorted(entry["repo"] for entry in entries))
    lines = [f"{len(entries)} repositories: {names}" if entries else "0 repositories"]
    if entries:
        kinds = Counter(entry["kind"] for entry in entries)
        lines.append(f"{len(kinds)} kinds: " + ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())))
    lines.append(f"{'rule':<8}" + "".join(f"{column:>11}" for column in (*COLUMNS, "precision", "recall")))
    for code, row in rows.items():
        cells = [str(row[column]) for column in COLUMNS] + [percent(row["precision"]), percent(row["recall"])]
        lines.append(f"{code:<8}" + "".join(f"{cell:>11}" for cell in cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--since", help="only repositories checked on or after this date (YYYY-MM-DD)")
    parser.add_argument("--batch", help="only the repositories of this batch (the entries' \"batch\")")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--log", type=Path, default=LOG, help="the folder of the log (default: bench/fresh)")
    parser.add_argument("--write", action="store_true", help="record the figures in pitfall_lint/first_run.json")
    options = parser.parse_args(argv)
    if options.write and (options.since or options.batch):
        print("error: --write records the whole log; leave out --since and --batch", file=sys.stderr)
        return 2
    try:
        since = datetime.date.fromisoformat(options.since) if options.since else None
    except ValueError:
        print(f"error: --since {options.since!r} is not a YYYY-MM-DD date", file=sys.stderr)
        return 2
    try:
        entries = read_log(options.log, since, options.batch)
    except LogError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rows = figures(entries)
    if options.write:
        INSTALLED.write_text(installed(entries), encoding="utf-8")
    if options.json:
        print(json.dumps({"repositories": sorted(entry["repo"] for entry in entries), "rules": rows}, indent=1))
    else:
        print(table(entries, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
