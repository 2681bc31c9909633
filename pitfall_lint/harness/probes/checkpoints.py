"""PFL201-PFL204: what every rank saved and loaded, recorded per rank by the child processes."""

from __future__ import annotations

import os
from collections import defaultdict

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.base import Probe, at, errors_matching, errors_signed, last_line, signature
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord

_DISTRIBUTED = frozenset({"distributed", "script", "notebook"})
# Long enough that the other ranks reach their load while rank 0 is still "writing".
_SAVE_DELAY_SECONDS = "1.5"


def _listed(ranks: set[int]) -> str:
    *others, last = [str(r) for r in sorted(ranks)]
    return f"{', '.join(others)} and {last}" if others else last


class UnguardedSaveProbe(Probe):
    code = "PFL201"
    kinds = _DISTRIBUTED

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        writers: dict[str, set[int]] = defaultdict(set)
        for save in run.of("save"):
            if at(save, finding) and save.get("path") and save.get("rank") is not None:
                writers[save["path"]].add(save["rank"])
        if not writers:
            return None
        path, ranks = max(writers.items(), key=lambda item: len(item[1]))
        if len(ranks) > 1:
            return Judgement(
                "confirmed",
                Evidence(
                    f"ranks {_listed(ranks)} each wrote {path} from {run.line_name(finding.path, finding.line)}: concurrent "
                    "writers of one file corrupt it (the writes went to the scratch folder)"
                ),
            )
        return Judgement("not-reproduced", Evidence(f"only rank {_listed(ranks)} wrote {path}"))


    def observe(self, script: str, run: RunRecord) -> list[tuple[Diagnostic, Judgement]]:
        """Two ranks writing one file from a line no static finding flagged (a helper, a framework call)."""
        from pitfall_lint.rules.unguarded_torch_save import UnguardedTorchSave

        info = UnguardedTorchSave.info
        writers: dict[tuple[str, int, str], set[int]] = defaultdict(set)
        for save in run.of("save"):
            if save.get("file") and save.get("line") and save.get("path") and save.get("rank") is not None:
                writers[(save["file"], save["line"], save["path"])].add(save["rank"])
        found = []
        for (file, line, path), ranks in writers.items():
            if len(ranks) > 1:
                mechanism = (f"ranks {_listed(ranks)} each wrote {path} from {run.line_name(file, line)}: concurrent "
                             "writers of one file corrupt it (the writes went to the scratch folder)")
                message = f"every rank saves {os.path.basename(path)} here: save on one rank only (`if rank == 0:`)"
                found.append((Diagnostic(file, line, 1, info.code, info.name, line, 1, info.severity, message),
                              Judgement("confirmed", Evidence(mechanism))))
        return found


class MapLocationProbe(Probe):
    code = "PFL202"
    kinds = _DISTRIBUTED
    signatures = (signature("RuntimeError", "Attempting to deserialize object on a CUDA device",
                            "the checkpoint was restored onto the CUDA device it was saved from"),)

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        loads = [e for e in run.of("load") if at(e, finding) and not e.get("map_location") and e.get("rank") is not None]
        if not loads:
            return None
        devices = sorted({d for e in loads for d in e.get("saved_on", [])})
        ranks = {e["rank"] for e in loads}
        gpu_devices = [d for d in devices if d.startswith("cuda")]
        if gpu_devices and len(ranks) > 1:
            failures = tuple(errors_signed(run, self.signatures))
            here = ""
            if failures:
                here = f"; without CUDA here, the load failed: {last_line(run.errors[failures[0]].get('message'))}"
            return Judgement(
                "confirmed",
                Evidence(
                    f"ranks {_listed(ranks)} each loaded {loads[0]['path']}, saved from {', '.join(gpu_devices)}, without "
                    f"map_location: on GPUs every rank restores it onto {gpu_devices[0]}{here}"
                ),
                failures,
            )
        if len(ranks) > 1:
            return Judgement("not-reproduced", Evidence(f"the checkpoint holds tensors saved from {', '.join(devices) or 'no device'}, which every rank can load"))
        return Judgement("not-reproduced", Evidence(f"only rank {_listed(ranks)} loaded it"))


class WrappedStateDictProbe(Probe):
    code = "PFL203"
    kinds = _DISTRIBUTED | {"example", "model"}
    signatures = (signature("RuntimeError", r'Unexpected key\(s\) in state_dict: "module\.', "a state_dict saved from "
                            "the DataParallel or DDP wrapper, every key prefixed `module.`, was loaded into the bare model",
                            telling=True),)
    remedy = "save `model.module.state_dict()` (the wrapped model's own), or strip the prefix before loading"

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        failures = tuple(errors_signed(run, self.signatures))
        saved = [e for e in run.of("save") if at(e, finding)]
        if saved:
            key = next((e["prefixed_key"] for e in saved if e.get("prefixed_key")), None)
            if key is None:
                return Judgement("not-reproduced", Evidence("the saved state_dict's keys carry no `module.` prefix"))
            tail = f"; loading it into the bare model failed: {last_line(run.errors[failures[0]].get('message')).strip()}" if failures else ""
            return Judgement("confirmed", Evidence(f"every key of the saved state_dict starts with `module.` (e.g. `{key}`){tail}"), failures)
        lenient = [e for e in run.of("lenient-load") if at(e, finding)]
        if lenient:
            event = lenient[0]
            if event.get("unexpected_prefixed") and event.get("loaded") == 0:
                return Judgement(
                    "confirmed",
                    Evidence(f"strict=False loaded nothing: {event['missing']} keys missing, unexpected ones such as `{event['unexpected_prefixed'][0]}`"),
                )
            return Judgement("not-reproduced", Evidence("the lenient load matched the model's keys"))
        return None


class BarrierProbe(Probe):
    code = "PFL204"
    kinds = _DISTRIBUTED
    # A missing file, or one read while rank 0 still writes it (torch's zip reader; a pickle cut short).
    signatures = (
        signature("FileNotFoundError", "No such file or directory", "a rank read the checkpoint before it was written"),
        signature("RuntimeError", "PytorchStreamReader failed", "a rank read the checkpoint while it was being written"),
        signature("EOFError UnpicklingError", "Ran out of input|EOFError", "a rank read the checkpoint while it was being "
                  "written"),
    )

    def environment(self, findings: list[Diagnostic]) -> dict[str, str]:
        return {"PITFALL_LINT_SAVE_DELAY": _SAVE_DELAY_SECONDS} if findings else {}

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        loads = [e for e in run.of("load") if at(e, finding)]
        failures = [
            i for i in errors_signed(run, self.signatures) if at(run.errors[i].get("user_frame") or {}, finding)
        ]
        if failures:
            error = run.errors[failures[0]]
            return Judgement(
                "confirmed",
                Evidence(
                    f"with rank 0's save taking {_SAVE_DELAY_SECONDS} s (a slower disk), rank {error.get('rank')} read the "
                    "checkpoint before it was written",
                    error.get("type"),
                    last_line(error.get("message")),
                    error.get("user_frame"),
                ),
                tuple(failures) + tuple(errors_matching(run, "Connection closed by peer")),
            )
        if loads and run.returncode == 0:
            return Judgement("not-reproduced", Evidence(f"every rank read a complete checkpoint even with a {_SAVE_DELAY_SECONDS} s slower save"))
        return None
