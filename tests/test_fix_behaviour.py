"""Every fix keeps what the program does: the original and the fixed program are run, and what they print and write
is compared, in order and in number.

PFL301 (the main guard): a property over generated top-level programs. Such a program, run as written, fails under
`spawn`: each child imports the script again, reaches the starting statement and dies with the bootstrapping
RuntimeError. What the author meant is what the same program does under `fork`, where a child inherits the parent
and runs only its target: the parent runs every top-level statement once, in order, and each child runs its target
once. So the oracle is the original program with the `fork` start method, and the fixed program, under `spawn`,
must print and write exactly what the oracle does: the parent's lines in the same order, each child's line once (the
children of one pool run in any order, so consecutive child lines are compared as a set), the same files with the
same contents. It must also match the generator's own account of the parent's effects. A program whose children
need something an effect before the start sets up (a list the parent appends to, a value computed by a call) cannot
be fixed safely: there the fix must be withheld, and the file left as it is.

The other fixes run their bad fixture and its fixed version and compare what they print and write; each test says
which difference is the fix's documented intent.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from marks import REPO

pytest.importorskip("libcst")

from pitfall_lint.fix import fix_source  # noqa: E402
from pitfall_lint.rules import all_rules  # noqa: E402

_CHILD = re.compile(r"^child ")


@dataclass
class Program:
    """A generated script, what its parent prints and appends to log.txt, and the tags its children run with."""

    lines: list[str] = field(default_factory=list)
    parent_prints: list[str] = field(default_factory=list)
    parent_log: list[str] = field(default_factory=list)
    written: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    withheld_because: list[str] = field(default_factory=list)  # why no safe fix exists, when one of these is in it

    @property
    def source(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass
class _Names:
    constants: list[str] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)
    count: int = 0

    def fresh(self) -> int:
        self.count += 1
        return self.count


def _effect(draw: st.DrawFn, program: Program, names: _Names) -> None:
    n = names.fresh()
    kind = draw(st.sampled_from(["print", "append", "write", "call-helper", "read-constant", "read-class"]))
    if kind == "call-helper" and names.helpers:
        helper = draw(st.sampled_from(names.helpers))
        program.lines.append(f"print({helper}(), flush=True)")
        program.parent_prints.append(helper.replace("helper_", "H"))
    elif kind == "read-constant" and names.constants:
        constant = draw(st.sampled_from(names.constants))
        program.lines.append(f"print({constant}, flush=True)")
        program.parent_prints.append(constant.replace("CONST_", "C"))
    elif kind == "read-class" and names.classes:
        box = draw(st.sampled_from(names.classes))
        program.lines.append(f"print({box}.value, flush=True)")
        program.parent_prints.append(box.replace("Box_", "B"))
    elif kind == "append":
        program.lines += ['with open("log.txt", "a") as log:', f'    log.write("L{n}\\n")']
        program.parent_log.append(f"L{n}")
    elif kind == "write":
        program.lines.append(f'open("w{n}.txt", "w").write("W{n}")')
        program.written[f"w{n}.txt"] = f"W{n}"
    else:
        program.lines.append(f'print("P{n}", flush=True)')
        program.parent_prints.append(f"P{n}")


def _definition(draw: st.DrawFn, program: Program, names: _Names, late: bool = False) -> None:
    n = names.fresh()
    kind = draw(st.sampled_from(["function", "constant", "class"]))
    if kind == "function":
        program.lines += [f"def helper_{n}():", f'    return "H{n}"']
        names.helpers.append(f"helper_{n}")
    elif kind == "constant":
        program.lines.append(f'CONST_{n} = "C{n}"')
        names.constants.append(f"CONST_{n}")
    else:
        program.lines += [f"class Box_{n}:", f'    value = "B{n}"']
        names.classes.append(f"Box_{n}")


def _items(draw: st.DrawFn, program: Program, names: _Names, most: int) -> None:
    for _ in range(draw(st.integers(0, most))):
        if draw(st.booleans()):
            _effect(draw, program, names)
        else:
            _definition(draw, program, names)


def _start(draw: st.DrawFn, program: Program, names: _Names, launcher: str) -> None:
    n = names.fresh()
    if launcher == "torch":
        program.lines.append("torch.multiprocessing.spawn(work, nprocs=2)")
        program.tags += ["0", "1"]
    elif draw(st.booleans()):
        program.lines += [
            f'proc_{n} = multiprocessing.get_context("spawn").Process(target=work, args=("t{n}",))',
            f"proc_{n}.start()",
            f"proc_{n}.join()",
        ]
        program.tags.append(f"t{n}")
    else:
        program.lines += [
            f'with multiprocessing.get_context("spawn").Pool(2) as pool_{n}:',
            f'    pool_{n}.map(work, ["t{n}a", "t{n}b"])',
        ]
        program.tags += [f"t{n}a", f"t{n}b"]


@st.composite
def programs(draw: st.DrawFn, launcher: str = "multiprocessing") -> Program:
    """Effects and definitions, the worker, one or two starts, more effects and definitions after them, and now and
    then one of the things that make a safe fix impossible."""
    imported = "import torch.multiprocessing" if launcher == "torch" else "import multiprocessing"
    program = Program(lines=["import os", imported, ""])
    names = _Names()
    _items(draw, program, names, 3)
    # The worker reads what the children may read safely: constants and functions defined before it.
    safe = [*names.constants, *(f"{helper}()" for helper in names.helpers)]
    reads = draw(st.lists(st.sampled_from(safe), max_size=2, unique=True)) if safe else []
    risks = ["none"] if launcher == "torch" else ["none"] * 5 + ["shared-list", "computed-value", "late-constant"]
    risk = draw(st.sampled_from(risks))
    if risk == "shared-list":  # the parent fills a list the children read: a spawned child would see it empty
        program.lines.append("SHARED = []")
        reads.append("len(SHARED)")
        program.withheld_because.append(risk)
    elif risk == "computed-value":  # a call's result the children read: moved, they would not have it
        program.lines.append("COMPUTED = sum([1, 2])")
        reads.append("COMPUTED")
        program.withheld_because.append(risk)
    elif risk == "late-constant":  # bound after the start: forked children never have it
        reads.append("LATE")
        program.withheld_because.append(risk)
    shown = "".join(f", {r}" for r in reads)
    program.lines += [
        "",
        "def work(tag):",
        # One write per line: the children of a pool print at the same time.
        f'    os.write(1, " ".join(map(str, ["child", tag{shown}, "\\n"])).encode())',
        '    with open("child-" + str(tag) + ".txt", "a") as out:',
        '        out.write(str(tag) + "\\n")',
        "",
    ]
    _items(draw, program, names, 2)
    if risk == "shared-list":
        program.lines.append('SHARED.append("x")')
    for _ in range(draw(st.integers(1, 1 if launcher == "torch" else 2))):
        _start(draw, program, names, launcher)
        _items(draw, program, names, 2)
    if risk == "late-constant":
        program.lines.append('LATE = "late"')
    _items(draw, program, names, 3)
    return program


def _run(source: str, folder: Path) -> tuple[list[str], dict[str, str]]:
    """What the program prints (each run of consecutive child lines sorted) and the files it leaves."""
    (folder / "program.py").write_text(source)
    completed = subprocess.run(
        [sys.executable, "program.py"], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, (source, completed.stderr)
    printed, run = [], []
    for line in completed.stdout.splitlines():
        if _CHILD.match(line):
            run.append(line)
            continue
        printed += sorted(run) + [line]
        run = []
    printed += sorted(run)
    files = {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.name != "program.py"}
    return printed, files


def _forked(source: str) -> str:
    """The original program as its author meant it: children that inherit the parent instead of importing it."""
    forked = source.replace('get_context("spawn")', 'get_context("fork")')
    return forked.replace(
        "torch.multiprocessing.spawn(work, nprocs=2)",
        'torch.multiprocessing.start_processes(work, nprocs=2, start_method="fork")',
    )


def _check(program: Program) -> None:
    source = program.source
    fixed = fix_source("program.py", source.encode(), all_rules(), unsafe=False)
    if program.withheld_because:
        event(f"fix withheld: {program.withheld_because[0]}")
        assert not fixed.applied and fixed.fixed == source.encode(), (program.withheld_because, source)
        return
    event("fixed, then both programs run")
    assert fixed.applied == Counter({"PFL301": fixed.applied["PFL301"]}) and fixed.applied["PFL301"] >= 1, source
    with tempfile.TemporaryDirectory() as meant, tempfile.TemporaryDirectory() as after_fix:
        expected = _run(_forked(source), Path(meant))
        got = _run(fixed.fixed.decode(), Path(after_fix))
    assert got == expected, (source, fixed.fixed.decode())
    printed, files = got
    assert [line for line in printed if not _CHILD.match(line)] == program.parent_prints
    assert sorted(line.split()[1] for line in printed if _CHILD.match(line)) == sorted(program.tags)  # each child once
    assert files.get("log.txt", "") == "".join(f"{entry}\n" for entry in program.parent_log)
    assert {name: files[name] for name in program.written} == program.written
    assert {name: text for name, text in files.items() if name.startswith("child-")} == {
        f"child-{tag}.txt": f"{tag}\n" for tag in program.tags
    }


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_main_guard_fix_keeps_what_the_program_does(program: Program) -> None:
    _check(program)


# The script of issue 15: `mp.spawn`, then a print and a file written after the workers have finished. The old fix moved
# only the spawn under a new guard at the end, so both ran before the workers started, and again in every child.
_SPAWN_THEN_FINISH = Program(
    lines=[
        "import os",
        "import torch.multiprocessing",
        "",
        "def work(tag):",
        '    os.write(1, " ".join(map(str, ["child", tag, "\\n"])).encode())',
        '    with open("child-" + str(tag) + ".txt", "a") as out:',
        '        out.write(str(tag) + "\\n")',
        "",
        "torch.multiprocessing.spawn(work, nprocs=2)",
        'print("finished", flush=True)',
        'with open("done.txt", "w") as done:',
        '    done.write("done\\n")',
    ],
    parent_prints=["finished"],
    written={"done.txt": "done\n"},
    tags=["0", "1"],
)


# torch takes seconds to import, in the parent and again in every spawned child: one generated program, and the issue's.
@settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@example(_SPAWN_THEN_FINISH)
@given(programs(launcher="torch"))
def test_main_guard_fix_keeps_what_a_torch_spawn_program_does(program: Program) -> None:
    pytest.importorskip("torch")
    _check(program)


def test_the_unfixed_program_fails_under_spawn(tmp_path: Path) -> None:
    """Why the oracle above is the `fork` run: as written, a spawned child imports the script again, repeats what comes
    before the start, and dies while bootstrapping instead of running its target."""
    source = textwrap.dedent(
        """\
        import multiprocessing
        def work():
            print("target ran", flush=True)
        print("parent", flush=True)
        proc = multiprocessing.get_context("spawn").Process(target=work)
        proc.start()
        proc.join()
        print("exit code", proc.exitcode, flush=True)
        """
    )
    (tmp_path / "program.py").write_text(source)
    completed = subprocess.run(
        [sys.executable, "program.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert completed.stdout == "parent\nparent\nexit code 1\n"
    assert "before the current process has finished its bootstrapping phase" in " ".join(completed.stderr.split())


# --- the other fixes, on their bad fixture ------------------------------------------------------------------------

# Runs script.py in each folder it is given, as `python script.py` would, with WORLD ranks (forked, so that torch is
# imported once): torch seeded, a file store for the rendezvous instead of the network, every torch.save announced.
# pytorch/pytorch#56297: when a DDP model is freed, its reducer can free the last reference to a ProcessGroupGloo, whose
# destructor joins its worker thread while holding the GIL, and that thread may be waiting for the GIL to free its
# last work: the rank hangs (seen in about one run in fifteen on a loaded 2-core machine). So every DDP model is kept
# until the process leaves with os._exit, which frees nothing: no script's behaviour depends on that teardown.
_DRIVER = '''
import os, runpy, sys
import torch
import torch._dynamo  # DDP imports it when first built: once here rather than once in every forked rank
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

kept_alive = []
real_ddp_init = DistributedDataParallel.__init__
def keep_alive(self, *args, **kwargs):
    kept_alive.append(self)
    real_ddp_init(self, *args, **kwargs)
DistributedDataParallel.__init__ = keep_alive

def run(rank, world, folder):
    os.chdir(folder)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
    real_init, real_save = dist.init_process_group, torch.save
    def init(backend=None, **kwargs):
        kwargs.setdefault("init_method", "file://" + os.path.join(folder, "rendezvous"))
        kwargs.setdefault("rank", rank)
        kwargs.setdefault("world_size", world)
        return real_init(backend, **kwargs)
    def save(obj, f, *args, **kwargs):
        os.write(1, f"rank {rank} saves {os.path.basename(str(f))}\\n".encode())
        return real_save(obj, f, *args, **kwargs)
    dist.init_process_group, torch.save = init, save
    torch.manual_seed(0)
    try:
        runpy.run_path("script.py", run_name="__main__")
    except Exception as error:
        os.write(1, f"rank {rank} raised {type(error).__name__}\\n".encode())
    finally:
        dist.init_process_group, torch.save = real_init, real_save
        if dist.is_initialized():  # a run that failed half-way
            dist.destroy_process_group()

world = int(sys.argv[1])
for folder in sys.argv[2:]:
    os.write(1, f"== {os.path.basename(folder)}\\n".encode())
    if world == 1:
        run(0, 1, folder)
    else:
        torch.multiprocessing.start_processes(run, args=(world, folder), nprocs=world, start_method="fork")
os._exit(0)  # forked ranks leave through os._exit too (multiprocessing's fork start)
'''
_LEFT_BY_THE_RUN = {"script.py", "rendezvous"}


def _bad_and_fixed(code: str) -> dict[str, str]:
    (folder,) = (REPO / "fixtures").glob(f"{code}-*")
    bad = (folder / "bad.py").read_text()
    fixed = fix_source(str(folder / "bad.py"), bad.encode(), all_rules(), unsafe=True)
    assert fixed.applied[code] >= 1
    return {"bad": bad, "fixed": fixed.fixed.decode()}


Run = tuple[list[str], dict[str, bytes]]


def _drive(
    tmp_path: Path, scripts: dict[str, str], world: int, given: dict[str, dict[str, bytes]] | None
) -> tuple[dict[str, Path], str]:
    """The folders of the scripts and the driver's output; on a timeout, every rank is killed with the driver."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    folders = {}
    for name, script in scripts.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "script.py").write_text(script)
        for file, data in (given or {}).get(name, {}).items():
            (folder / file).write_bytes(data)
        folders[name] = folder
    (tmp_path / "driver.py").write_text(_DRIVER)
    driver = subprocess.Popen(
        [sys.executable, "-u", str(tmp_path / "driver.py"), str(world), *map(str, folders.values())],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    try:
        stdout, stderr = driver.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(driver.pid, signal.SIGKILL)  # the forked ranks too: none is left behind
        driver.communicate()
        raise
    assert driver.returncode == 0, stderr
    return folders, stdout


def _run_fixture(
    tmp_path: Path, scripts: dict[str, str], world: int = 1, given: dict[str, dict[str, bytes]] | None = None
) -> dict[str, Run]:
    """Each script's output lines (sorted when several ranks print) and the files it wrote, by name; `given` puts
    files into a script's folder first."""
    pytest.importorskip("torch")
    folders, stdout = _drive(tmp_path, scripts, world, given)
    sections: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        if line.startswith("== "):
            current = sections.setdefault(line[3:], [])
        else:
            current.append(line)
    return {
        name: (
            sorted(sections[name]) if world > 1 else sections[name],
            {
                p.name: p.read_bytes()
                for p in sorted(folder.iterdir())
                if p.name not in _LEFT_BY_THE_RUN | set((given or {}).get(name, {}))
            },
        )
        for name, folder in folders.items()
    }


def test_total_length_fix_pads_to_the_input_and_changes_nothing_else(tmp_path: Path) -> None:
    """PFL102. The intent: the unpacked output is padded to the padded input's length (`total_length=padded.size(1)`)
    instead of to the longest sequence of the batch. On the fixture's own batch the longest sequence fills the padding,
    so the output is the same; on a batch whose longest sequence is 5 of 6 steps, the fixed output has one more step,
    all zeros, and the first 5 steps are the unfixed output exactly."""
    probe = textwrap.dedent(
        """
        if __name__ == "__main__":
            torch.manual_seed(1)
            out = Tagger()(torch.randn(4, 6, 4), torch.tensor([5, 4, 2, 2]))
            print(tuple(out.shape), round(out[:, :5].sum().item(), 5), out[:, 5:].abs().sum().item())
        """
    )
    runs = _run_fixture(tmp_path, {name: script + probe for name, script in _bad_and_fixed("PFL102").items()})
    (bad, bad_files), (fixed, fixed_files) = runs["bad"], runs["fixed"]
    assert bad[0] == fixed[0] == "torch.Size([4, 6, 6])"  # the fixture's own run
    assert bad[1].startswith("(4, 5, 6) ") and fixed[1].startswith("(4, 6, 6) ")
    assert bad[1].split()[3:] == fixed[1].split()[3:]  # the same first 5 steps; nothing but zeros after them
    assert fixed[1].split()[4] == "0.0"
    assert len(bad) == len(fixed) == 2 and bad_files == fixed_files == {}


def test_rank_zero_guard_fix_leaves_one_rank_saving_and_changes_nothing_else(tmp_path: Path) -> None:
    """PFL201 (unsafe). The intent: only rank 0 saves. With one rank the runs print and write the same (the same
    checkpoint, byte for byte); with two ranks the only difference is rank 1's save, which is gone."""
    scripts = _bad_and_fixed("PFL201")
    alone = _run_fixture(tmp_path / "one", scripts)
    assert alone["bad"] == alone["fixed"]
    assert alone["fixed"][0] == ["rank 0 saves checkpoint.pt"] and set(alone["fixed"][1]) == {"checkpoint.pt"}
    two = _run_fixture(tmp_path / "two", scripts, world=2)
    assert two["bad"][0] == ["rank 0 saves checkpoint.pt", "rank 1 saves checkpoint.pt"]
    assert two["fixed"][0] == ["rank 0 saves checkpoint.pt"]
    assert set(two["bad"][1]) == set(two["fixed"][1]) == {"checkpoint.pt"}


def test_map_location_fix_loads_onto_the_cpu_and_changes_nothing_else(tmp_path: Path) -> None:
    """PFL202 (unsafe). The intent: tensors are restored onto the CPU (`map_location="cpu"`) instead of the device they
    were saved from. With a checkpoint saved on the CPU both runs print the same; with the fixture's checkpoint saved
    from cuda:0, the unfixed run restores onto cuda:0 (or, without CUDA, fails to deserialize) and the fixed one onto
    the CPU."""
    torch = pytest.importorskip("torch")
    import io

    buffer = io.BytesIO()
    torch.save(torch.nn.Linear(4, 2).state_dict(), buffer)
    scripts = _bad_and_fixed("PFL202")
    from_gpu = (REPO / "fixtures" / "PFL202-load-without-map-location" / "checkpoint_from_gpu.pt").read_bytes()
    checkpoints = {"cpu": buffer.getvalue(), "gpu": from_gpu}
    versions = {
        f"{name}-{saved}": (script, data) for name, script in scripts.items() for saved, data in checkpoints.items()
    }
    runs = _run_fixture(
        tmp_path,
        {version: script for version, (script, _) in versions.items()},
        given={version: {"checkpoint_from_gpu.pt": data} for version, (_, data) in versions.items()},
    )
    assert runs["bad-cpu"] == runs["fixed-cpu"] == (["rank 0 resumed: cpu"], {})
    unfixed = "rank 0 resumed: cuda:0" if torch.cuda.is_available() else "rank 0 raised RuntimeError"
    assert runs["bad-gpu"] == ([unfixed], {}) and runs["fixed-gpu"] == (["rank 0 resumed: cpu"], {})


def test_set_epoch_fix_reshuffles_each_epoch_and_changes_nothing_else(tmp_path: Path) -> None:
    """PFL402. The intent: epoch e draws DistributedSampler's order for epoch e (a permutation seeded with seed + e)
    instead of epoch 0's every time. Epoch 0 is the same in both runs; epoch 1 differs in exactly that way."""
    torch = pytest.importorskip("torch")
    runs = _run_fixture(tmp_path, _bad_and_fixed("PFL402"))

    def order(epoch: int) -> list[int]:
        return torch.randperm(8, generator=torch.Generator().manual_seed(epoch)).tolist()

    assert order(0) != order(1)
    assert runs["bad"] == ([f"rank 0 epoch 0: order {order(0)}", f"rank 0 epoch 1: order {order(0)}"], {})
    assert runs["fixed"] == ([f"rank 0 epoch 0: order {order(0)}", f"rank 0 epoch 1: order {order(1)}"], {})
