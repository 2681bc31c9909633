"""PFL306 hardcoded-master-port: every literal-port form, and the configurable or free-port forms that are fine."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from marks import assert_marks, reported
from test_project_model import assert_project

CASES = {
    "environ-subscript-string": """
        import os
        def setup(rank, world_size):
            os.environ["MASTER_ADDR"] = "localhost"
            os.environ["MASTER_PORT"] = "12355"  # expect: PFL306
    """,
    "environ-subscript-int-and-str-call": """
        import os
        os.environ["MASTER_PORT"] = 29500  # expect: PFL306
        os.environ["MASTER_PORT"] = str(29501)  # expect: PFL306
    """,
    "environ-through-from-import-alias": """
        from os import environ as env
        env["MASTER_PORT"] = "12355"  # expect: PFL306
    """,
    "environ-multi-line-reported-at-the-literal": """
        import os
        os.environ[
            "MASTER_PORT"
        ] = (
            "12355"  # expect: PFL306
        )
    """,
    "environ-update-dict-and-keywords": """
        import os
        os.environ.update({"MASTER_ADDR": "localhost", "MASTER_PORT": "12355"})  # expect: PFL306
        os.environ.update(MASTER_ADDR="localhost", MASTER_PORT="12356")  # expect: PFL306
    """,
    "putenv": """
        import os
        os.putenv("MASTER_PORT", "12355")  # expect: PFL306
    """,
    "local-variable": """
        import os
        def setup():
            port = "12355"  # expect: PFL306
            os.environ["MASTER_PORT"] = port
    """,
    "module-constant": """
        import os
        PORT = "12355"  # expect: PFL306
        def setup():
            os.environ["MASTER_PORT"] = PORT
    """,
    "init-method-keyword": """
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:23456", rank=0, world_size=1)  # expect: PFL306
    """,
    "init-method-positional": """
        from torch.distributed import init_process_group
        init_process_group("nccl", "tcp://10.1.1.20:23456", rank=0, world_size=2)  # expect: PFL306
    """,
    "init-method-f-string-literal-port": """
        import torch.distributed as dist
        def setup(host, rank):
            dist.init_process_group("gloo", init_method=f"tcp://{host}:23456", rank=rank, world_size=2)  # expect: PFL306
    """,
    "init-method-concatenation-format-percent": """
        import torch.distributed as dist
        def setup(host):
            dist.init_process_group("gloo", init_method="tcp://" + host + ":23456")  # expect: PFL306
            dist.init_process_group("gloo", init_method="tcp://{}:23456".format(host))  # expect: PFL306
            dist.init_process_group("gloo", init_method="tcp://%s:23456" % host)  # expect: PFL306
    """,
    "init-method-variable": """
        import torch.distributed as dist
        def setup():
            url = "tcp://localhost:29500"  # expect: PFL306
            dist.init_process_group("gloo", init_method=url)
    """,
    "rpc-backend-options": """
        from torch.distributed.rpc import TensorPipeRpcBackendOptions
        options = TensorPipeRpcBackendOptions(init_method="tcp://localhost:29501")  # expect: PFL306
        options.init_method = "tcp://localhost:29502"  # expect: PFL306
    """,
    "url-attributes": """
        import os
        import subprocess
        import torch
        def main(args, cfg):
            if "SLURM_JOB_NODELIST" in os.environ:
                host_name = subprocess.check_output(["scontrol", "show", "hostnames"]).decode().splitlines()[0]
                args.dist_url = f"tcp://{host_name}:58472"  # expect: PFL306
            else:
                args.dist_url = "tcp://localhost:58472"  # expect: PFL306
            cfg.distributed_init_method = "tcp://localhost:12356"  # expect: PFL306
            torch.multiprocessing.spawn(worker, (args,), args.ngpus_per_node)
        def worker(gpu, args):
            torch.distributed.init_process_group(backend="nccl", init_method=args.dist_url, world_size=2, rank=gpu)
    """,
    "ipv6-host": """
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://[::1]:23456")  # expect: PFL306
    """,
    "tcp-store-positional-and-keyword": """
        import torch.distributed as dist
        from datetime import timedelta
        store = dist.TCPStore("127.0.0.1", 29500, 2, True, timedelta(seconds=30))  # expect: PFL306
        other = dist.TCPStore(host_name="127.0.0.1", port=29501, world_size=2, is_master=False)  # expect: PFL306
    """,
    "tcp-store-alias": """
        from torch.distributed import TCPStore as Store
        store = Store("localhost", 1234, 1, True)  # expect: PFL306
    """,
    "converted-module-constant": """
        import os
        PORT = 29500  # expect: PFL306
        LABEL = "12355"  # expect: PFL306
        def setup():
            os.environ["MASTER_PORT"] = str(PORT)
            os.environ["MASTER_PORT"] = f"{LABEL}"
    """,
    "converted-local-variable": """
        import os
        def setup(rank):
            port = 12355  # expect: PFL306
            os.environ["MASTER_PORT"] = f"{port!s}"
            os.putenv("MASTER_PORT", str(port))
    """,
    "init-method-f-string-of-a-constant-port": """
        import torch.distributed as dist
        PORT = 29500  # expect: PFL306
        def setup(rank):
            dist.init_process_group("gloo", init_method=f"tcp://localhost:{PORT}", rank=rank, world_size=2)
            dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + str(PORT), rank=rank, world_size=2)
    """,
    "init-method-f-string-without-placeholders": """
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:29500", rank=0, world_size=1)  # expect: PFL306
    """,
    "init-method-local-port-in-f-string": """
        import torch.distributed as dist
        def setup(host, rank):
            port = "23456"  # expect: PFL306
            dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=rank, world_size=2)
    """,
    "tcp-store-constant-port": """
        import torch.distributed as dist
        STORE_PORT = 29600  # expect: PFL306
        store = dist.TCPStore("127.0.0.1", STORE_PORT, 1, True)
    """,
    "setdefault-in-a-script-that-spawns-its-workers": """
        import os
        import torch.multiprocessing as mp
        def setup(rank, world_size):
            os.environ.setdefault("MASTER_ADDR", "localhost")
            os.environ.setdefault("MASTER_PORT", "29500")  # expect: PFL306
        if __name__ == "__main__":
            mp.spawn(setup, args=(2,), nprocs=2)
    """,
    "guarded-default-in-a-script-that-starts-processes": """
        import os
        from multiprocessing import Process
        PORT = 12910  # expect: PFL306
        def work():
            if "MASTER_PORT" not in os.environ:
                os.environ["MASTER_PORT"] = str(PORT)
        if __name__ == "__main__":
            Process(target=work).start()
    """,
    "uses-beside-or-after-a-test-of-an-error": """
        import os
        import pytest
        import torch.distributed as dist
        def test_rejects_a_tcp_url():
            with pytest.raises(ValueError):
                pass
            dist.init_process_group("gloo", init_method="tcp://10.1.1.20:23456", rank=0, world_size=1)  # expect: PFL306
            with pytest.raises(ValueError), open("log") as log:
                pass
            store = dist.TCPStore("127.0.0.1", 29500, 1, True)  # expect: PFL306
    """,
    "environment-fallbacks-in-a-file-that-starts-its-workers": """
        import os
        import torch.distributed as dist
        import torch.multiprocessing as mp
        DEFAULT_PORT = "29512"  # expect: PFL306
        def setup_environment():
            os.environ["MASTER_PORT"] = os.environ.get("MASTER_PORT", "15000")  # expect: PFL306
            os.environ["MASTER_PORT"] = os.getenv("MASTER_PORT") or "29511"  # expect: PFL306
            return os.environ.get("MASTER_PORT", DEFAULT_PORT)
        def run(worker, nprocs, master_port=None):
            if master_port is None:
                master_port = int(os.getenv("MASTER_PORT", 2222))  # expect: PFL306
            url = f"tcp://127.0.0.1:{os.getenv('MASTER_PORT', default='29510')}"  # expect: PFL306
            start_processes = mp.start_processes
            start_processes(worker, args=(master_port, url), nprocs=nprocs, start_method="spawn")
    """,
    "environment-of-a-child-process": """
        import os
        import subprocess
        def launch(command, rank):
            subprocess.run(command, env={**os.environ, "RANK": str(rank), "MASTER_PORT": "29500"})  # expect: PFL306
            child = dict(os.environ, MASTER_PORT="29501")  # expect: PFL306
            subprocess.Popen(command, env=child)
    """,
    "mappings-a-file-copies-into-the-environment": """
        import os
        import torch.distributed as dist
        class Trainer:
            def __init__(self, env_vars):
                for key, value in env_vars.items():
                    os.environ[key] = str(value)
                dist.init_process_group("nccl")
        class TestParameterServer:
            def _get_env_vars(self, rank, world_size):
                return {"RANK": str(rank), "WORLD_SIZE": str(world_size), "MASTER_PORT": "29500"}  # expect: PFL306
            def test_receive(self):
                Trainer(self._get_env_vars(0, 2))
                Trainer(dict(RANK="1", WORLD_SIZE="2", MASTER_PORT="29500"))  # expect: PFL306
    """,
    "mappings-updated-into-the-environment-from-a-name-or-spread": """
        import os
        def patch_environment(**variables):
            os.environ.update(**variables)
        ENVIRONMENT = {"MASTER_ADDR": "localhost", "MASTER_PORT": "12355"}  # expect: PFL306
        def setup():
            patch_environment(MASTER_PORT="12356")  # expect: PFL306
            os.environ.update(ENVIRONMENT)
    """,
    "parameter-defaults-no-call-passes": """
        import os
        import torch.distributed as dist
        import torch.multiprocessing as mp
        def setup(rank, world_size, port="12355"):  # expect: PFL306
            os.environ["MASTER_PORT"] = port
            dist.init_process_group("gloo", rank=rank, world_size=world_size)
        def connect(rank, *, url="tcp://127.0.0.1:23456", timeout=30):  # expect: PFL306
            dist.init_process_group("gloo", init_method=url, rank=rank, world_size=2)
        def train(rank, world_size):
            setup(rank, world_size)
            connect(rank, timeout=60)
        if __name__ == "__main__":
            mp.spawn(train, args=(2,), nprocs=2)
    """,
    "config-defaults-no-use-sets": """
        from dataclasses import dataclass, field
        from typing import ClassVar
        import torch.distributed as dist
        import torch.multiprocessing as mp
        @dataclass
        class MNISTConfig:
            lr: float = 2e-4
            registry: ClassVar[dict] = {}
            backend: str = "nccl"
            init_method: str = "tcp://127.0.0.1:23456"  # expect: PFL306
            master_port: int = field(default=12355)  # expect: PFL306
            world_size: int = 1
        class Options:
            dist_url = "tcp://localhost:23457"  # expect: PFL306
        def main(rank, config):
            dist.init_process_group(config.backend, config.init_method, rank=rank, world_size=config.world_size)
        if __name__ == "__main__":
            options = Options()
            config = MNISTConfig(2e-4, "gloo", world_size=2)
            mp.spawn(main, args=(config,), nprocs=config.world_size)
    """,
    "config-field-in-a-file-that-spells-no-other-word-of-the-rule": """
        from dataclasses import dataclass
        @dataclass
        class DistributedConfig:
            world_size: int = 2
            master_port: int = 12355  # expect: PFL306
        config = DistributedConfig(4)
    """,
    # Fine: the port comes from elsewhere, is a default the launcher can override, or is free.
    "setdefault-under-a-launcher-is-a-default": """
        import os
        import torch.distributed as dist
        os.environ.setdefault("MASTER_PORT", "29500")
        dist.init_process_group("gloo")
    """,
    "converted-ports-from-elsewhere": """
        import os
        import torch.distributed as dist
        import torch.multiprocessing as mp
        FREE = find_free_port()
        ZERO = 0
        FROM_ENV = int(os.environ.get("PORT", "29500"))
        def setup(rank, args, host):
            os.environ["MASTER_PORT"] = str(FREE)
            os.environ["MASTER_PORT"] = f"{ZERO}"
            os.environ["MASTER_PORT"] = str(FROM_ENV)
            os.environ["MASTER_PORT"] = f"{args.master_port}"
            os.environ.setdefault("MASTER_PORT", str(find_free_port()))
            os.environ.setdefault("MASTER_PORT", "0")
            dist.init_process_group("gloo", init_method=f"tcp://{host}:{args.port}")
            dist.init_process_group("gloo", init_method=f"tcp://localhost:{os.environ['MASTER_PORT']}")
            dist.init_process_group("gloo", init_method="tcp://localhost:" + str(FREE))
            dist.init_process_group("gloo", init_method=f"tcp://localhost:{ZERO}")
        if __name__ == "__main__":
            mp.spawn(setup, args=(OPTIONS, "localhost"), nprocs=2)
    """,
    "environment-fallbacks-under-a-launcher": """
        import os
        import torch.distributed as dist
        os.environ["MASTER_PORT"] = os.environ.get("MASTER_PORT", "15000")
        master_port = int(os.getenv("MASTER_PORT", 2222)) or int(os.environ.get("MASTER_PORT") or "29511")
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{master_port}")
    """,
    "setdefault-is-a-default": """
        import os
        os.environ.setdefault("MASTER_PORT", "29500")
    """,
    "guarded-default-not-in": """
        import os
        if "MASTER_PORT" not in os.environ:
            os.environ["MASTER_PORT"] = "12910"
    """,
    "guarded-default-get": """
        import os
        if not os.environ.get("MASTER_PORT", None):
            os.environ["MASTER_PORT"] = "29500"
    """,
    "guarded-default-else-branch": """
        import os
        if "MASTER_PORT" in os.environ:
            pass
        else:
            os.environ["MASTER_PORT"] = "29500"
    """,
    "from-arguments-or-a-free-port": """
        import os
        def setup(args, port_finder):
            os.environ["MASTER_PORT"] = args.master_port
            os.environ["MASTER_PORT"] = str(port_finder())
            os.environ["MASTER_PORT"] = os.environ.get("PORT", "29500")
    """,
    "parameter-default-is-the-callers": """
        import os
        PORT = "12355"
        def setup(PORT="29500"):
            os.environ["MASTER_PORT"] = PORT
    """,
    "reassigned-module-variable-is-not-a-constant": """
        import os
        PORT = "12355"
        PORT = find_port()
        os.environ["MASTER_PORT"] = PORT
    """,
    "port-zero": """
        import os
        import torch.distributed as dist
        os.environ["MASTER_PORT"] = "0"
        store = dist.TCPStore("127.0.0.1", 0, 1, True)
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0")
    """,
    "placeholder-port-and-other-schemes": """
        import torch.distributed as dist
        def setup(host, port, path):
            dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}")
            dist.init_process_group("gloo", init_method="tcp://{}:{}".format(host, port))
            dist.init_process_group("gloo", init_method="env://")
            dist.init_process_group("gloo", init_method=f"file://{path}")
    """,
    "tests-of-an-error-raise-before-binding": """
        import os
        import unittest
        import pytest
        from pytest import raises as expect_error
        import torch.distributed as dist
        import ignite.distributed as idist
        def test_create_from_backend():
            with pytest.raises(ValueError, match="TCP initialization"):
                dist.init_process_group("gloo", init_method="tcp://10.1.1.20:23456", rank=0, world_size=1)
        def test_parallel():
            with pytest.raises(ValueError):
                with idist.Parallel(backend="gloo", init_method="tcp://10.1.1.20:23456") as parallel:
                    parallel.run(print)
        def test_store():
            with expect_error(RuntimeError):
                store = dist.TCPStore("127.0.0.1", 29500, 1, True)
        class TestEnvironment(unittest.TestCase):
            def test_port(self):
                with self.assertRaisesRegex(RuntimeError, "port"):
                    os.environ["MASTER_PORT"] = "12355"
                    dist.init_process_group("gloo")
    """,
    "private-methods-called-or-not": """
        import os
        import torch.distributed as dist
        class Worker:
            def start(self):
                self._join()
            def _join(self):
                os.environ["MASTER_PORT"] = "29500"  # expect: PFL306
                dist.init_process_group("gloo")
            def _join_old(self):
                os.environ["MASTER_PORT"] = "29400"
                dist.init_process_group("gloo")
    """,
    "url-attributes-from-elsewhere-or-not-for-rendezvous": """
        import random
        def main(args, cfg, socket):
            args.dist_url = f"tcp://localhost:{random.randrange(49152, 65535)}"
            cfg.distributed_init_method = "tcp://localhost:{port}".format(port=args.port)
            args.hidden_init_method = "xavier"
            socket.url = "tcp://localhost:5555"
            args.dist_url = "env://"
    """,
    "mappings-no-environment-receives": """
        import os
        import subprocess
        from unittest import mock
        import pytest
        EXPECTED = {"RANK": "0", "MASTER_PORT": "29500"}
        def run(command, env_for):
            subprocess.run(command, env=env_for(0))
            subprocess.run(command, env={"MASTER_PORT": str(find_free_port())})
        @pytest.mark.parametrize("environ", [{"MASTER_ADDR": "c1", "MASTER_PORT": "12233"}])
        def test_parse(environ):
            assert parse(environ)["MASTER_PORT"] == 12233
    """,
    "mappings-for-tests-in-a-file-that-copies-mappings": """
        import os
        from unittest import mock
        def restore(backup):
            for key, value in backup.items():
                os.environ[key] = value
        @mock.patch.dict(os.environ, {"MASTER_ADDR": "1.2.3.4", "MASTER_PORT": "500"})
        def test_cluster_environment(popen):
            with mock.patch.dict(os.environ, MASTER_PORT="501"):
                assert read_environment() == {"MASTER_PORT": "501"}
            popen.assert_called_once_with(["python"], env={"MASTER_PORT": "502"})
            assert read_environment() == dict(MASTER_PORT="503")
    """,
    "parameter-defaults-the-callers-may-choose": """
        import os
        import torch.distributed as dist
        import torch.multiprocessing as mp
        def setup(rank, world_size, port="12355"):
            os.environ["MASTER_PORT"] = port
        def by_keyword(port="12356"):
            os.environ["MASTER_PORT"] = port
        def by_star(rank, port="12357"):
            os.environ["MASTER_PORT"] = port
        def spawned(rank, port="12358"):
            os.environ["MASTER_PORT"] = port
        def never_called(port="12359"):
            os.environ["MASTER_PORT"] = port
        def reassigned(port="12360"):
            port = find_free_port()
            os.environ["MASTER_PORT"] = port
        class Launcher:
            def prepare(self, port="12361"):
                os.environ["MASTER_PORT"] = port
        def main(args):
            setup(0, 2, args.port)
            by_keyword(port=args.port)
            by_star(*args.rest)
            reassigned()
            Launcher().prepare()
            mp.spawn(spawned, nprocs=2)
    """,
    "config-defaults-the-user-may-choose": """
        import argparse
        import dataclasses
        from dataclasses import dataclass
        from transformers import HfArgumentParser
        @dataclass
        class ParsedConfig:
            init_method: str = "tcp://127.0.0.1:23456"
        @dataclass
        class PositionalConfig:
            backend: str = "nccl"
            init_method: str = "tcp://127.0.0.1:23457"
        @dataclass
        class KeywordConfig:
            init_method: str = "tcp://127.0.0.1:23458"
        @dataclass
        class AssignedConfig:
            dist_url: str = "tcp://127.0.0.1:23459"
        @dataclass
        class ReplacedConfig:
            master_port: int = 23460
        class Options(argparse.Namespace):
            init_method = "tcp://127.0.0.1:23461"
        class InitOptions:
            trainer_dist_url = "tcp://127.0.0.1:23462"
            def __init__(self, url=None):
                self.url = url or self.trainer_dist_url
        def main(url):
            parsed, = HfArgumentParser(ParsedConfig).parse_args_into_dataclasses()
            positional = PositionalConfig("gloo", url)
            keyword = KeywordConfig(init_method=url)
            assigned = AssignedConfig()
            assigned.dist_url = url
            replaced = dataclasses.replace(ReplacedConfig(), master_port=0)
            options = Options()
            init_options = InitOptions()
    """,
    "guarded-update-in-a-file-that-copies-mappings": """
        import os
        def restore(backup):
            os.environ.update(backup)
        if "MASTER_PORT" not in os.environ:
            os.environ.update({"MASTER_PORT": "29500"})
    """,
    "argparse-default-is-configurable": """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--dist-url", default="tcp://224.66.41.62:23456", type=str)
        parser.add_argument("--master_port", default="12355")
    """,
    "environment-copy-for-a-child-and-mocked-environ": """
        import os
        from unittest import mock
        env = os.environ.copy()
        env["MASTER_PORT"] = "29500"
        with mock.patch.dict(os.environ, {"MASTER_PORT": "500"}):
            pass
    """,
    "reading-the-variable": """
        import os
        port = int(os.environ["MASTER_PORT"])
        assert os.environ["MASTER_PORT"] == "12355"
    """,
    "other-variables-and-unrelated-store": """
        import os
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["REDIS_PORT"] = "6379"
        class TCPStore:
            def __init__(self, host, port): pass
        store = TCPStore("localhost", 6379)
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(dedent(CASES[name]))


HELPER = """
import os
from contextlib import contextmanager
from multiprocessing import Process
import torch.distributed as dist
{decorator}
def {name}():
    os.environ["MASTER_PORT"] = str(12345)  # {mark}
    dist.init_process_group("gloo", rank=0, world_size=1)
{use}
"""


@pytest.mark.parametrize(
    ("path", "name", "decorator", "use", "found"),
    [
        # Nothing can call it: a test file's helper pytest does not collect (torchtune's `single_box_init`), a private
        # function, a private method.
        ("tests/test_utils.py", "single_box_init", "@contextmanager", "", False),
        ("train_test.py", "init_group", "", "", False),
        ("train.py", "_init_group", "", "", False),
        # Called, or run by something that does not spell its name: found.
        ("tests/test_utils.py", "single_box_init", "@contextmanager", "with single_box_init():\n    pass", True),
        ("train.py", "_init_group", "", "if __name__ == '__main__':\n    Process(target=_init_group).start()", True),
        ("tests/test_utils.py", "init_group", "", "# init_group is kept for the nightly suite", True),
        ("tests/test_distributed.py", "test_all_reduce", "", "", True),
        ("tests/test_distributed.py", "setup_module", "", "", True),
        ("tests/conftest.py", "pytest_configure", "", "", True),
        ("tests/conftest.py", "distributed_group", "import pytest\n@pytest.fixture", "", True),
        ("tests/test_utils.py", "__call__", "", "", True),
        # A public function outside the tests is its users' to call.
        ("src/library/distributed.py", "init_group", "", "", True),
        ("tests_utils.py", "init_group", "", "", True),
    ],
)
def test_a_helper_nothing_calls(path: str, name: str, decorator: str, use: str, found: bool) -> None:
    source = HELPER.format(decorator=decorator, name=name, use=use, mark="")
    line = source.splitlines().index('    os.environ["MASTER_PORT"] = str(12345)  # ') + 1
    assert reported(source, path) == ({("PFL306", line)} if found else set())


def test_a_helper_is_live_when_another_file_names_it(tmp_path: Path) -> None:
    assert_project(
        tmp_path,
        {
            "tests/test_utils.py": HELPER.format(decorator="", name="init_group", use="", mark="expect: PFL306"),
            "tests/test_collectives.py": "from tests.test_utils import init_group\ndef test_sum():\n    init_group()\n",
            # Named nowhere else: a private function, and any helper in a tests folder.
            "tests/test_nothing.py": HELPER.format(decorator="", name="_unused", use="", mark=""),
            "tests/helpers/distributed.py": HELPER.format(decorator="", name="init_unused", use="", mark=""),
            "src/distributed.py": HELPER.format(decorator="", name="init_public", use="", mark="expect: PFL306"),
        },
    )


CONFIG = """
from dataclasses import dataclass
@dataclass
class MNISTConfig:
    backend: str = "nccl"
    init_method: str = "tcp://127.0.0.1:23456"  # {mark}
def main():
    args = MNISTConfig()
"""


def test_a_default_is_the_port_only_where_no_other_file_can_set_it(tmp_path: Path) -> None:
    assert_project(
        tmp_path,
        {
            # Two scripts, each with a config of its own of one name: neither imports the other's.
            "main_launch.py": CONFIG.format(mark="expect: PFL306"),
            "main_mp.py": CONFIG.format(mark="expect: PFL306"),
            # A config and a set-up function another module imports, and may give another port.
            "configs.py": CONFIG.format(mark="") + "def setup(url='tcp://127.0.0.1:23457'):\n"
            "    import torch.distributed as dist\n    dist.init_process_group('gloo', init_method=url)\nsetup()\n",
            "train.py": "from configs import MNISTConfig, setup\nconfig = MNISTConfig(init_method='env://')\n"
            "setup(config.init_method)\n",
        },
    )
