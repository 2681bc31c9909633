"""A flat single-machine multi-GPU template (DataParallel): its log and weights are named after the script itself.

    cd src && python train_DP.py --epochs 1
"""

import argparse
import sys

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=10, help="number of epochs of training")
parser.add_argument("--batch_size", type=int, default=32, help="size of the batches")
parser.add_argument("--lr", type=float, default=0.001, help="learning rate")
parser.add_argument("--result_dir", type=str, default="../result", help="dir for saving the results")
opt = parser.parse_args()


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


print("step 1/4: data loading...")
dataset = TensorDataset(torch.randn(256, 1, 28, 28), torch.randint(0, 10, (256,)))
dataloader = DataLoader(dataset=dataset, batch_size=opt.batch_size, shuffle=True)

print("step 2/4: model defining...")
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.DataParallel(Model().to(device))
loss_func = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=opt.lr, betas=(0.5, 0.999))

print("step 3/4: training...")
f = open(opt.result_dir + "/log_" + sys.argv[0][0:-3] + ".txt", "w")
f.write("Parallel manner: DataParallel\n")
for epoch in range(opt.epochs):
    for i, (imgs, labels) in enumerate(dataloader):
        imgs, labels = imgs.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = loss_func(model(imgs), labels)
        loss.backward()
        optimizer.step()
    f.write(f"epoch {epoch}: loss {loss.item():.4f}\n")
f.close()

print("step 4/4: saving...")
torch.save(model.classifier.state_dict(), opt.result_dir + "/head_" + sys.argv[0][0:-3] + ".pkl")
