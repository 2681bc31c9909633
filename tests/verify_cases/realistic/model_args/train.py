"""SimSiam pre-training, in the shape of facebookresearch/simsiam's main_simsiam.py.

    python train.py /path/to/imagenet -a resnet_small --dim 64 --pred-dim 16
"""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

import builder
import encoders

model_names = sorted(name for name in encoders.__dict__
                     if name.islower() and not name.startswith("__") and callable(encoders.__dict__[name]))

parser = argparse.ArgumentParser(description="SimSiam pre-training")
parser.add_argument("data", metavar="DIR", help="path to dataset")
parser.add_argument("-a", "--arch", metavar="ARCH", default="resnet_tiny", choices=model_names)
parser.add_argument("--epochs", default=100, type=int)
parser.add_argument("-b", "--batch-size", default=64, type=int)
parser.add_argument("--lr", default=0.05, type=float)
parser.add_argument("--dim", default=64, type=int, help="feature dimension")
parser.add_argument("--pred-dim", default=16, type=int, help="hidden dimension of the predictor")


def main() -> None:
    args = parser.parse_args()
    print(f"=> creating model '{args.arch}'")
    model = builder.SimSiam(encoders.__dict__[args.arch], args.dim, args.pred_dim)
    model = nn.DataParallel(model).cuda()
    criterion = nn.CosineSimilarity(dim=1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
    images = torch.load(args.data)  # two augmented views per image
    loader = DataLoader(TensorDataset(images[:, 0], images[:, 1]), batch_size=args.batch_size, shuffle=True)
    for epoch in range(args.epochs):
        for x1, x2 in loader:
            p1, p2, z1, z2 = model(x1.cuda(non_blocking=True), x2.cuda(non_blocking=True))
            loss = -(criterion(p1, z2).mean() + criterion(p2, z1).mean()) * 0.5
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
