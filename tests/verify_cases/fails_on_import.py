"""A DDP script whose imports fail: its finding cannot be judged, and the failure is reported as such."""

import torch
import torch.distributed as dist
import a_module_that_is_not_installed  # noqa: F401


def main() -> None:
    dist.init_process_group("gloo")
    torch.save({}, "state.pt")  # expect: PFL201


if __name__ == "__main__":
    main()
