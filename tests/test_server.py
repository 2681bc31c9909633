"""`pitfall-lint server`, the Language Server, driven end to end as an editor drives it: a real process, spoken to in
JSON-RPC over its stdin and stdout by the small client below (Content-Length framing), every wait bounded so that a
hung server fails the test instead of hanging the run."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pitfall_lint.docs import rule_document

from marks import REPO

TIMEOUT = 60.0  # seconds for one answer: generous for a loaded CI machine, and only ever waited in full on a failure
# The installed command, as editors start it (`python -m` would put the project's folder first on the import path).
SERVER = [str(Path(sys.executable).with_name("pitfall-lint")), "server"]

Message = dict[str, Any]

NET = '''"""A model whose forward is picked at construction time."""

import torch
from torch import nn


class TwoHeads(nn.Module):
    def __init__(self, fast: bool = True) -> None:
        super().__init__()
        self.head = nn.Linear(8, 2)
        self.forward = self.fast_forward if fast else self.head

    def fast_forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x)
'''
WRAP = "    model = nn.DataParallel(model)\n"
# Sets up a distributed run: without the DataParallel wrap (WRAP), nothing can replicate TwoHeads.
TRAIN = f'''import torch
import torch.distributed as dist
from torch import nn

from models.net import TwoHeads


def main() -> None:
    dist.init_process_group("gloo")
    model = TwoHeads()
{WRAP}    return model(torch.randn(4, 8))
'''
# The bound forward stored on line 11, as the editor counts: 0-based lines, UTF-16 columns.
BOUND_FORWARD = {
    "code": "PFL101",
    "range": {"start": {"line": 10, "character": 8}, "end": {"line": 10, "character": 63}},
}
LOADER = '''import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


def train(dataset, epochs: int) -> None:
    dist.init_process_group("gloo")
    sampler = DistributedSampler(dataset, seed=len("😀"))
    loader = DataLoader(dataset, sampler=sampler)
    for epoch in range(epochs):
        for batch in loader:
            print(batch)
'''
# The sampler on line 7: the emoji is one character to Python, two UTF-16 units to the editor.
SAMPLER_RANGE = {"start": {"line": 6, "character": 14}, "end": {"line": 6, "character": 57}}
SAVE = "import torch\nimport torch.distributed as dist\n\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\n"


class Client:
    """The editor's side: requests answered by id, the server's own requests (registerCapability) answered with
    null, and every notification kept in the order it came."""

    def __init__(self, cwd: Path, stderr: Path, command: list[str] = SERVER) -> None:
        self._stderr = stderr.open("wb")
        self.process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr)
        self._incoming: queue.Queue[Message | None] = queue.Queue()
        self.notifications: list[Message] = []
        self.server_requests: list[Message] = []
        self._responses: dict[int, Message] = {}
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            length = None
            while (header := stream.readline()) not in (b"\r\n", b""):
                name, _, value = header.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if header == b"" or length is None:
                self._incoming.put(None)  # the server closed its stdout
                return
            self._incoming.put(json.loads(stream.read(length)))

    def send(self, message: Message) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        assert self.process.stdin is not None
        self.process.stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode("ascii") + body)
        self.process.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: Any) -> Any:
        self._next_id += 1
        number = self._next_id
        self.send({"id": number, "method": method, "params": params})
        self.wait(lambda: number in self._responses, f"the answer to {method}")
        response = self._responses.pop(number)
        assert "error" not in response, response
        return response["result"]

    def wait(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not condition():
            try:
                message = self._incoming.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                latest = json.dumps(self.notifications[-3:], indent=1)
                pytest.fail(f"no {what} within {TIMEOUT:.0f} s; the latest notifications: {latest}\nthe server's stderr:\n{self.stderr()}")
            if message is None:
                pytest.fail(f"the server ended before {what}; it said on stderr:\n{self.stderr()}")
            if "id" in message and "method" in message:
                self.server_requests.append(message)
                self.send({"id": message["id"], "result": None})
            elif "id" in message:
                self._responses[message["id"]] = message
            else:
                self.notifications.append(message)

    def stderr(self) -> str:
        self._stderr.flush()
        return Path(self._stderr.name).read_text(encoding="utf-8", errors="replace")

    def published(self, uri: str) -> list[Message]:
        return [n["params"] for n in self.notifications if n["method"] == "textDocument/publishDiagnostics" and n["params"]["uri"] == uri]

    def diagnostics(self, uri: str, expected: list[Message] | None = None) -> list[Message]:
        """The latest diagnostics of the document, as code and range, once they are `expected` (any, if None): each
        change republishes, so the latest ones are what the editor shows."""

        def latest() -> list[Message] | None:
            sent = self.published(uri)
            return [{"code": d["code"], "range": d["range"]} for d in sent[-1]["diagnostics"]] if sent else None

        self.wait(lambda: latest() is not None and (expected is None or latest() == expected), f"diagnostics {expected} of {uri}")
        return latest()  # type: ignore[return-value]

    def logged(self, text: str) -> Message:
        self.wait(lambda: any(text in m["params"]["message"] for m in self.notifications if m["method"].startswith("window/")), text)
        return next(m for m in self.notifications if m["method"].startswith("window/") and text in m["params"]["message"])

    def initialize(self, root: Path) -> Message:
        capabilities = {
            "workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}},
            "textDocument": {"publishDiagnostics": {"versionSupport": True, "relatedInformation": True}},
        }
        result = self.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": capabilities})
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: str | None = None, version: int = 1) -> str:
        uri = path.as_uri()
        text = path.read_text(encoding="utf-8") if text is None else text
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}})
        return uri

    def replace(self, uri: str, text: str, version: int) -> None:
        """The whole text, as one change."""
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]})

    def edit(self, uri: str, where: Message, text: str, version: int) -> None:
        """One span replaced, as editors send a keystroke (the server asks for incremental changes)."""
        change = {"range": where, "text": text}
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]})

    def changed_on_disk(self, path: Path) -> None:
        self.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": path.as_uri(), "type": 2}]})

    def code_actions(self, uri: str, where: Message, diagnostics: Sequence[Message] = (), only: list[str] | None = None) -> Any:
        context: Message = {"diagnostics": list(diagnostics), **({"only": only} if only is not None else {})}
        return self.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": where, "context": context})

    def hover(self, uri: str, position: Message) -> Any:
        return self.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": position})

    def close(self) -> int:
        """shutdown, then exit: the server's exit code."""
        assert self.request("shutdown", None) is None
        self.notify("exit", None)
        try:
            return self.process.wait(timeout=TIMEOUT)
        finally:
            self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._stderr.close()


def at(line: int, character: int) -> Message:
    return {"line": line, "character": character}


def span(start: tuple[int, int], end: tuple[int, int]) -> Message:
    return {"start": at(*start), "end": at(*end)}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write(root / "pyproject.toml", "[project]\nname = 'demo'\nrequires-python = '>=3.10'\n")
    write(root / "models" / "__init__.py", "")
    write(root / "models" / "net.py", NET)
    write(root / "train.py", TRAIN)
    return root


@pytest.fixture
def client(project: Path, tmp_path: Path) -> Client:
    started = Client(project, tmp_path / "stderr.txt")
    yield started
    started.kill()


def test_an_edit_of_one_file_changes_the_findings_of_another(client: Client, project: Path) -> None:
    """The wrap in train.py's buffer, saved or not, decides whether models/net.py's bound forward is a finding."""
    initialized = client.initialize(project)
    assert initialized["serverInfo"]["name"] == "pitfall-lint"
    capabilities = initialized["capabilities"]
    assert (capabilities["positionEncoding"], capabilities["hoverProvider"], capabilities["codeActionProvider"]) == (
        "utf-16", True, {"codeActionKinds": ["quickfix"]}
    )
    assert capabilities["textDocumentSync"] == {"openClose": True, "change": 2, "save": True}
    net = client.open(project / "models" / "net.py")
    train = client.open(project / "train.py")
    assert client.diagnostics(net, [BOUND_FORWARD]) == [BOUND_FORWARD]
    (sent,) = client.published(net)[-1]["diagnostics"]
    assert sent["severity"] == 2 and sent["source"] == "pitfall-lint"
    assert sent["relatedInformation"] == [
        {"location": {"uri": train, "range": span((10, 0), (10, 0))}, "message": "wrapped by nn.DataParallel"}
    ]
    assert client.diagnostics(train, []) == []
    client.edit(train, span((10, 0), (11, 0)), "", version=2)  # the wrap deleted, never saved
    assert client.diagnostics(net, []) == []
    client.replace(train, TRAIN, version=3)
    assert client.diagnostics(net, [BOUND_FORWARD]) == [BOUND_FORWARD]
    assert client.close() == 0


def test_a_file_changed_by_another_tool_changes_the_findings_of_the_open_ones(client: Client, project: Path) -> None:
    """train.py is not open: what is on disk counts, read again when the client says it changed, or on a save."""
    write(project / "train.py", TRAIN.replace(WRAP, ""))
    client.initialize(project)
    client.wait(lambda: client.server_requests != [], "the registration of the watched files")
    (registration,) = client.server_requests[0]["params"]["registrations"]
    assert registration["method"] == "workspace/didChangeWatchedFiles"
    watched = [watcher["globPattern"] for watcher in registration["registerOptions"]["watchers"]]
    assert watched == ["**/*.py", "**/pyproject.toml", "**/.gitignore"]
    net = client.open(project / "models" / "net.py")
    assert client.diagnostics(net, []) == []
    client.changed_on_disk(write(project / "train.py", TRAIN))
    assert client.diagnostics(net, [BOUND_FORWARD]) == [BOUND_FORWARD]
    write(project / "train.py", TRAIN.replace(WRAP, ""))  # a client that watches nothing: a save checks again too
    client.notify("textDocument/didSave", {"textDocument": {"uri": net}})
    assert client.diagnostics(net, []) == []
    assert client.close() == 0


def test_a_safe_fix_an_unsafe_one_and_a_noqa_are_offered(client: Client, project: Path) -> None:
    # PFL201, the unsafe fix's rule, is a preview rule since 2026-11-25: the project's configuration turns preview on.
    write(project / "pyproject.toml", (project / "pyproject.toml").read_text() + "\n[tool.pitfall-lint]\npreview = true\n")
    client.initialize(project)
    loader = client.open(write(project / "loader.py", LOADER))
    finding = {"code": "PFL402", "range": SAMPLER_RANGE}
    assert client.diagnostics(loader, [finding]) == [finding]
    (sent,) = client.published(loader)[-1]["diagnostics"]
    assert client.code_actions(loader, span((6, 20), (6, 20)), [sent]) == [
        {
            "title": "Fix PFL402 (missing-set-epoch)",
            "kind": "quickfix",
            "diagnostics": [sent],
            "isPreferred": True,
            "edit": {"changes": {loader: [{"range": span((9, 0), (9, 0)), "newText": "        sampler.set_epoch(epoch)\n"}]}},
        },
        {
            "title": "Ignore PFL402 on this line (# noqa: PFL402)",
            "kind": "quickfix",
            "diagnostics": [sent],
            "edit": {"changes": {loader: [{"range": span((6, 57), (6, 57)), "newText": "  # noqa: PFL402"}]}},
        },
    ]
    client.edit(loader, span((6, 57), (6, 57)), "  # noqa: PFL402", version=2)  # the noqa action, applied
    assert client.diagnostics(loader, []) == []

    saver = client.open(write(project / "save.py", SAVE))
    unsafe = {"code": "PFL201", "range": span((4, 0), (4, 22))}
    assert client.diagnostics(saver, [unsafe]) == [unsafe]
    actions = client.code_actions(saver, unsafe["range"])
    assert [(action["title"], action.get("isPreferred")) for action in actions] == [
        ("Fix PFL201 (unguarded-torch-save), unsafe: it may change behaviour", False),
        ("Ignore PFL201 on this line (# noqa: PFL201)", None),
    ]
    assert actions[0]["edit"]["changes"][saver] == [
        {"range": span((4, 0), (4, 22)), "newText": "if dist.get_rank() == 0:\n    torch.save({}, 'c.pt')"}
    ]
    assert client.code_actions(saver, span((0, 0), (0, 0))) == []  # no finding there
    assert client.code_actions(saver, unsafe["range"], only=["source.organizeImports"]) == []  # what a save asks for
    assert client.close() == 0


def test_hover_on_a_finding_shows_its_rule_document(client: Client, project: Path) -> None:
    client.initialize(project)
    loader = client.open(write(project / "loader.py", LOADER))
    client.diagnostics(loader, [{"code": "PFL402", "range": SAMPLER_RANGE}])
    document = rule_document("PFL402", "missing-set-epoch")
    assert document is not None and document.startswith("# PFL402 missing-set-epoch\n")
    assert client.hover(loader, at(6, 30)) == {"contents": {"kind": "markdown", "value": document}, "range": SAMPLER_RANGE}
    assert client.hover(loader, at(5, 4)) is None
    assert client.close() == 0


def test_a_file_that_does_not_parse_is_a_finding_and_the_server_goes_on(client: Client, project: Path) -> None:
    client.initialize(project)
    broken = client.open(write(project / "loader.py", LOADER.replace("epochs: int)", "epochs: int")))
    parse_error = {"code": "PFL000", "range": span((4, 31), (4, 31))}
    assert client.diagnostics(broken, [parse_error]) == [parse_error]
    (sent,) = client.published(broken)[-1]["diagnostics"]
    assert (sent["message"], sent["severity"]) == ("cannot parse: invalid syntax", 1)
    assert client.code_actions(broken, parse_error["range"], [sent]) == []  # no comment can silence it
    net = client.open(project / "models" / "net.py")
    assert client.diagnostics(net, [BOUND_FORWARD]) == [BOUND_FORWARD]
    client.replace(broken, LOADER, version=2)
    assert client.diagnostics(broken, [{"code": "PFL402", "range": SAMPLER_RANGE}])
    # A notebook opened as text: its findings are placed in cells, which a text document has not.
    notebook = client.open(project / "nb.ipynb", (REPO / "fixtures" / "PFL308-spawn-from-notebook" / "bad.ipynb").read_text(encoding="utf-8"))
    assert client.diagnostics(notebook, []) == []
    assert client.close() == 0


def test_the_nearest_pyproject_configures_each_file(client: Client, project: Path) -> None:
    """Its selection, its exclusions (as `check --force-exclude` applies them), and its errors, shown to the user."""
    write(project / "legacy" / "pyproject.toml", '[tool.pitfall-lint]\nignore = ["PFL402"]\n')
    write(project / "pyproject.toml", '[tool.pitfall-lint]\nexclude = ["generated"]\n')
    client.initialize(project)
    here = client.open(write(project / "loader.py", LOADER))
    legacy = client.open(write(project / "legacy" / "loader.py", LOADER))
    generated = client.open(write(project / "generated" / "loader.py", LOADER))
    assert client.diagnostics(here, [{"code": "PFL402", "range": SAMPLER_RANGE}])
    assert client.diagnostics(legacy, []) == []
    assert client.diagnostics(generated, []) == []
    client.changed_on_disk(write(project / "legacy" / "pyproject.toml", '[tool.pitfall-lint]\nignore = ["PFL999"]\n'))
    shown = client.logged("matches no rule code")
    assert shown["method"] == "window/showMessage"
    assert shown["params"] == {
        "type": 1,
        "message": f"pitfall-lint: {project / 'legacy' / 'pyproject.toml'}: [tool.pitfall-lint] ignore: 'PFL999' matches no rule code",
    }
    client.changed_on_disk(write(project / "legacy" / "pyproject.toml", '[tool.pitfall-lint]\nignore = ["PFL2"]\n'))
    assert client.diagnostics(legacy, [{"code": "PFL402", "range": SAMPLER_RANGE}])
    assert client.close() == 0


BROKEN_HOVER_AND_RULE = """
import sys
import pitfall_lint.rules.missing_set_epoch as rule
import pitfall_lint.server.protocol as protocol

def fail(*args):
    raise RuntimeError("boom")

protocol.rule_document = fail
rule.MissingSetEpoch.finish = fail
from pitfall_lint.cli import main
main(["server"])
"""


def test_an_internal_error_is_logged_and_the_server_goes_on(project: Path, tmp_path: Path) -> None:
    """Bugs put in on purpose: the hover's rule documents, and one rule's check of a file, raise."""
    client = Client(project, tmp_path / "stderr.txt", [sys.executable, "-c", BROKEN_HOVER_AND_RULE])
    try:
        client.initialize(project)
        loader = client.open(write(project / "loader.py", LOADER))
        assert client.diagnostics(loader, []) == []
        logged = client.logged("internal error")
        assert (logged["method"], logged["params"]["type"]) == ("window/logMessage", 1)
        assert logged["params"]["message"].startswith(f"{project / 'loader.py'}: internal error at ")
        assert logged["params"]["message"].endswith(": RuntimeError: boom")
        net = client.open(project / "models" / "net.py")
        assert client.diagnostics(net, [BOUND_FORWARD]) == [BOUND_FORWARD]
        assert client.hover(net, at(10, 20)) is None
        logged = client.logged("internal error in textDocument/hover")
        assert logged == {
            "jsonrpc": "2.0",
            "method": "window/logMessage",
            "params": {"type": 1, "message": "internal error in textDocument/hover: RuntimeError: boom"},
        }
        assert client.code_actions(net, BOUND_FORWARD["range"]) != []  # the next request is served
        assert client.close() == 0
    finally:
        client.kill()


def test_exit_without_shutdown_is_exit_code_1(client: Client, project: Path) -> None:
    """As the protocol asks: the client ended the server without asking it to shut down first."""
    client.initialize(project)
    client.notify("exit", None)
    assert client.process.wait(timeout=TIMEOUT) == 1


def test_without_pygls_the_server_says_how_to_install_it(project: Path) -> None:
    hide_pygls = "import sys; sys.modules['pygls'] = None; from pitfall_lint.cli import main; main(['server'])"
    completed = subprocess.run([sys.executable, "-c", hide_pygls], cwd=project, capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert (completed.returncode, completed.stdout, completed.stderr) == (
        2, "", 'error: the language server needs pygls: pip install "pitfall-lint[server]"\n'
    )


def test_the_summaries_kept_are_bounded_and_the_least_recently_used_go_first() -> None:
    """A day of typing adds a summary for each version of a buffer: the store between checks must not grow forever."""
    from pitfall_lint.server.session import RecentSummaries

    store = RecentSummaries(2)
    store.put_all({"a": ["first"], "b": ["second"]})
    assert store.get("a") == ["first"]
    store.put_all({"c": ["third"]})
    assert (store.get("a"), store.get("b"), store.get("c")) == (["first"], None, ["third"])


@pytest.mark.parametrize(
    ("line", "suppressed"),
    [
        ("torch.save({}, 'c.pt')", "torch.save({}, 'c.pt')  # noqa: PFL201"),
        ("torch.save({}, 'c.pt')   ", "torch.save({}, 'c.pt')  # noqa: PFL201"),
        ("torch.save({}, 'c.pt')  # noqa: E501", "torch.save({}, 'c.pt')  # noqa: E501, PFL201"),
        ("torch.save({}, 'c.pt')  # big  # noqa:E501,W291 see below", "torch.save({}, 'c.pt')  # big  # noqa:E501,W291, PFL201 see below"),
        ("torch.save({}, \\", None),  # a comment would end the continued line
    ],
)
def test_the_noqa_of_a_code_action_is_the_one_the_check_reads(line: str, suppressed: str | None) -> None:
    from pitfall_lint.suppress import is_suppressed, with_noqa

    assert with_noqa(line, "PFL201") == suppressed
    assert suppressed is None or is_suppressed("PFL201", suppressed)
