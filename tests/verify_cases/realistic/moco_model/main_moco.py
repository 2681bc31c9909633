"""MoCo pre-training, in the shape of facebookresearch/moco's main_moco.py.

    python main_moco.py /path/to/imagenet --dist-url tcp://127.0.0.1:23456 --multiprocessing-distributed
"""
import argparse

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

import encoders
import moco.builder

model_names = sorted(name for name in encoders.__dict__
                     if name.islower() and not name.startswith("__") and callable(encoders.__dict__[name]))

parser = argparse.ArgumentParser(description="MoCo pre-training")
parser.add_argument("data", metavar="DIR", help="path to dataset")
parser.add_argument("-a", "--arch", metavar="ARCH", default="convnet_tiny", choices=model_names)
parser.add_argument("--dist-url", default="tcp://127.0.0.1:23456", type=str)
parser.add_argument("--moco-dim", default=16, type=int, help="feature dimension")
parser.add_argument("--moco-k", default=64, type=int, help="queue size; number of negative keys")
parser.add_argument("--moco-m", default=0.999, type=float, help="moco momentum of updating key encoder")
parser.add_argument("--moco-t", default=0.07, type=float, help="softmax temperature")
parser.add_argument("--mlp", action="store_true", help="use mlp head")


def main():
    args = parser.parse_args()
    ngpus_per_node = torch.cuda.device_count()
    mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))


def main_worker(gpu, ngpus_per_node, args):
    dist.init_process_group(backend="nccl", init_method=args.dist_url, world_size=ngpus_per_node, rank=gpu)
    model = moco.builder.MoCo(
        encoders.__dict__[args.arch],
        args.moco_dim, args.moco_k, args.moco_m, args.moco_t, args.mlp)
    torch.cuda.set_device(gpu)
    model.cuda(gpu)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[gpu])
    criterion = nn.CrossEntropyLoss().cuda(gpu)
    print(model, criterion)


if __name__ == "__main__":
    main()
