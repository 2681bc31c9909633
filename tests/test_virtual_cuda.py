"""The virtual CUDA devices, call by call, in a process of their own (they patch torch for the life of a process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from marks import REPO

pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")

_PROGRAM = textwrap.dedent('''
    import io, json, torch, torch.nn as nn, torch.nn.functional as F
    from pitfall_lint.harness.child import virtual_cuda
    virtual_cuda.install(torch, 2)
    seen = {}

    def error(call):
        try:
            call()
        except Exception as failure:
            return f"{type(failure).__name__}: {failure}".splitlines()[0]
        return None

    seen["available"] = [torch.cuda.is_available(), torch.cuda.device_count(), torch.accelerator.is_available()]
    x = torch.randn(4, 3)
    seen["cuda()"] = str(x.cuda().device)
    seen["cuda(1)"] = str(x.cuda(1).device)
    seen["to('cuda:1')"] = str(x.to("cuda:1").device)
    seen["to(1)"] = str(x.to(1).device)
    seen["to(device, dtype)"] = [str(x.to("cuda", torch.float64).device), str(x.to("cuda", torch.float64).dtype)]
    seen["device(0)"] = str(torch.device(0))
    seen["device('cuda', 1)"] = str(torch.zeros(2, device=torch.device("cuda", 1)).device)
    seen["factories"] = sorted({str(t.device) for t in (
        torch.zeros(2, device="cuda"), torch.ones(2, device="cuda:0"), torch.arange(3, device="cuda"),
        torch.tensor([1.0], device="cuda"), torch.randn(2, device="cuda"), torch.full((2,), 1.0, device="cuda"),
        torch.empty_like(x, device="cuda"), torch.as_tensor([1, 2], device="cuda"), x.new_zeros(2, device="cuda"))})
    torch.cuda.set_device(1)
    seen["set_device"] = [torch.cuda.current_device(), str(torch.ones(1, device="cuda").device)]
    torch.cuda.set_device(0)
    seen["bad ordinal"] = error(lambda: torch.cuda.set_device(2)).startswith("RuntimeError: CUDA error: invalid device ordinal")
    v = x.cuda()
    seen["is_cuda"] = [v.is_cuda, v.get_device(), str(v.cpu().device), type(v.cpu()).__name__]
    seen["numpy"] = error(lambda: v.numpy())
    seen["cross-device"] = error(lambda: v + x.cuda(1))
    seen["cpu scalar"] = str((v * torch.tensor(2.0)).device)

    model = nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    before = [id(p) for p in model.parameters()]
    model.to(0)
    seen["optimizer keeps parameters"] = before == [id(p) for p in optimizer.param_groups[0]["params"]] == [id(p) for p in model.parameters()]
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = F.cross_entropy(model(v), torch.tensor([0, 1, 0, 1]).cuda())
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    seen["training"] = [str(loss.device), str(model[0].weight.grad.device), str(next(iter(optimizer.state.values()))["exp_avg"].device)]
    seen["pin_memory"] = [x.pin_memory() is x, str(torch.utils.data.DataLoader(list(range(4)), pin_memory=True).__iter__().__next__().device)]
    torch.backends.cudnn.benchmark = True
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(); end.record()
    seen["queries"] = [torch.backends.cudnn.is_available(), torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated(),
                       torch.cuda.get_device_name(0), torch.cuda.get_device_capability(), start.elapsed_time(end) >= 0.0]

    # As the harness's torch.save and torch.load use them (child/instrument.py).
    saved = io.BytesIO()
    with virtual_cuda.saving():
        torch.save(model.state_dict(), saved)
    def devices(mapped):
        saved.seek(0)
        options = {} if mapped == "none" else {"map_location": mapped}
        return sorted({str(t.device) for t in virtual_cuda.load(torch.load, saved, (), options).values()})
    seen["load"] = {"none": devices("none"), "cpu": devices("cpu"), "cuda:1": devices("cuda:1"),
                    "dict": devices({"cuda:0": "cuda:1"}), "lambda .cuda(1)": devices(lambda s, loc: s.cuda(1)),
                    "lambda storage": devices(lambda s, loc: s)}
    print(json.dumps(seen))
''')


def test_virtual_devices_answer_as_a_node_of_two_gpus() -> None:
    completed = subprocess.run([sys.executable, "-c", _PROGRAM], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    seen = json.loads(completed.stdout.strip().splitlines()[-1])
    assert seen == {
        "available": [True, 2, True],
        "cuda()": "cuda:0",
        "cuda(1)": "cuda:1",
        "to('cuda:1')": "cuda:1",
        "to(1)": "cuda:1",
        "to(device, dtype)": ["cuda:0", "torch.float64"],
        "device(0)": "cuda:0",
        "device('cuda', 1)": "cuda:1",
        "factories": ["cuda:0"],
        "set_device": [1, "cuda:1"],
        "bad ordinal": True,
        "is_cuda": [True, 0, "cpu", "Tensor"],
        "numpy": "TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
                 "host memory first.",
        "cross-device": "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, "
                        "cuda:0 and cuda:1!",
        "cpu scalar": "cuda:0",
        "optimizer keeps parameters": True,
        "training": ["cuda:0", "cuda:0", "cuda:0"],
        "pin_memory": [True, "cpu"],
        "queries": [True, 0, 0, "pitfall-lint virtual CUDA device (CPU)", [8, 0], True],
        "load": {"none": ["cuda:0"], "cpu": ["cpu"], "cuda:1": ["cuda:1"], "dict": ["cuda:1"],
                 "lambda .cuda(1)": ["cuda:1"], "lambda storage": ["cpu"]},
    }


_RECURRENT = textwrap.dedent('''
    import json, warnings, torch, torch.nn as nn
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    from pitfall_lint.harness.child import virtual_cuda
    virtual_cuda.install(torch, 2)
    seen = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lstm, gru = nn.LSTM(4, 6, batch_first=True, bidirectional=True).cuda(1), nn.GRU(4, 6, num_layers=2).to("cuda")
        packed = pack_padded_sequence(torch.randn(2, 3, 4).cuda(1), torch.tensor([3, 2]), batch_first=True)
        output, _ = pad_packed_sequence(lstm(packed)[0], batch_first=True)
        output.sum().backward()
        seen["lstm"] = [str(output.device), list(output.shape), str(lstm.weight_ih_l0.grad.device)]
        seen["gru"] = str(gru(torch.randn(3, 2, 4).cuda())[0].device)
        seen["record_stream"] = output.record_stream(torch.cuda.current_stream())
    seen["warnings"] = [str(w.message) for w in caught]
    print(json.dumps(seen))
''')


def test_recurrent_layers_and_record_stream_run_on_virtual_devices_of_either_torch_build() -> None:
    """A CUDA build has cuDNN: an RNN moved to a virtual device asked it to flatten its weights (no CPU kernel), and
    the CPU build warned that it was compiled without cuDNN; torch's parser refused a virtual stream."""
    completed = subprocess.run([sys.executable, "-c", _RECURRENT], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == {
        "lstm": ["cuda:1", [2, 3, 12], "cuda:1"], "gru": "cuda:0", "record_stream": None, "warnings": []}


_DATA_AND_SET = textwrap.dedent('''
    import json, torch, torch.nn as nn
    from pitfall_lint.harness.child import virtual_cuda
    virtual_cuda.install(torch, 2)
    seen = {}
    weight = nn.Linear(4, 2).weight
    weight.tag = "kept"
    same = id(weight)
    with torch.no_grad():
        weight.data = weight.to("cuda:1")
    seen["moved by .data"] = [id(weight) == same, str(weight.device), isinstance(weight, nn.Parameter), weight.tag,
                              (weight * 2).sum().item() == (weight._inner * 2).sum().item()]
    flat = nn.Parameter(torch.arange(10.0, device="cuda"))
    with torch.no_grad():
        flat.data = flat[2:6]
        seen["sharded by .data"] = [list(flat.shape), flat.sum().item(), str(flat.device)]
        flat.set_(torch.ones(3, device="cuda"))
        seen["set_"] = [list(flat.shape), flat.sum().item(), str(flat.device)]
    def hook(grad):
        seen["hook"] = [str(grad.cpu().device), grad.is_cuda]

    output = nn.Linear(3, 1).cuda()(torch.ones(2, 3, device="cuda"))
    output.register_hook(hook)
    output.sum().backward()
    print(json.dumps(seen))
''')


def test_data_assignment_set_and_backward_hooks_behave_as_on_real_devices() -> None:
    """What FSDP (FullyShardedDataParallel) does to its parameters: `param.data = param.to(device)` gave the CPU
    parameter the storage-less wrapper (SIGSEGV at the first kernel), `.data = shard` and `set_` left the wrapper at
    its old size, and a backward hook saw virtual tensors with their overrides turned off."""
    completed = subprocess.run([sys.executable, "-c", _DATA_AND_SET], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == {
        "moved by .data": [True, "cuda:1", True, "kept", True],
        "sharded by .data": [[4], 14.0, "cuda:0"],
        "set_": [[3], 3.0, "cuda:0"],
        "hook": ["cpu", True],
    }
