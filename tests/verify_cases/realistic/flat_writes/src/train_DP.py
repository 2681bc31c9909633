"""A flat DataParallel training script kept in src/ with no project marker (no .git, no pyproject): it logs to
../result beside src/ and saves its weights wherever --save_dir points (an absolute path, outside the project).

    cd src && python train_DP.py --epochs 1 --save_dir /data/checkpoints
"""

import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=10, help="number of epochs of training")
parser.add_argument("--batch_size", type=int, default=32, help="size of the batches")
parser.add_argument("--lr", type=float, default=0.001, help="learning rate")
parser.add_argument("--result_dir", type=str, default="../result", help="dir for the training log")
parser.add_argument("--save_dir", type=str, default="/data/checkpoints", help="dir for the weights")
opt = parser.parse_args()
os.makedirs(opt.result_dir, exist_ok=True)
os.makedirs(opt.save_dir, exist_ok=True)
with open(os.path.join(opt.save_dir, "args.txt"), "w") as handle:
    handle.write(str(vars(opt)))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


dataset = TensorDataset(torch.randn(256, 1, 28, 28), torch.randint(0, 10, (256,)))
dataloader = DataLoader(dataset=dataset, batch_size=opt.batch_size, shuffle=True)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.DataParallel(Model().to(device))
loss_func = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=opt.lr)

log = open(os.path.join(opt.result_dir, "log_train_DP.txt"), "w")
for epoch in range(opt.epochs):
    for imgs, labels in dataloader:
        imgs, labels = imgs.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = loss_func(model(imgs), labels)
        loss.backward()
        optimizer.step()
    log.write(f"epoch {epoch}: loss {loss.item():.4f}\n")
    torch.save(model.state_dict(), os.path.join(opt.save_dir, f"epoch_{epoch}.pkl"))
log.close()

torch.save(model.classifier.state_dict(), os.path.join(opt.save_dir, "head.pkl"))
