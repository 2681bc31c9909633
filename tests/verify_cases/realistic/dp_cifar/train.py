"""CIFAR10 on every GPU there is, as one-file DataParallel templates have it: torchvision's CIFAR10 with
download=True, the class names and sizes printed from `.classes`, `.data` and `.targets`, DataLoaders with two
worker processes, and an accuracy on the test split after each epoch.

    python train.py
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(16, 10)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1  # expect: PFL104
        return self.head(self.features(x).flatten(1))


def main() -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))])
    train_set = datasets.CIFAR10("./data", train=True, download=True, transform=transform)
    test_set = datasets.CIFAR10("./data", train=False, download=True, transform=transform)
    print(f"classes: {', '.join(train_set.classes)}; {len(train_set.data)} training images of {train_set.data.shape[1:]}")
    print(f"{len(set(train_set.targets))} labels, {len(test_set)} test images")
    train_loader = DataLoader(train_set, batch_size=128, shuffle=True, num_workers=2)
    test_loader = DataLoader(test_set, batch_size=256, num_workers=2)

    model = Net()
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(2):
        model.train()
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in test_loader:
                correct += (model(images.to(device)).argmax(1) == labels.to(device)).sum().item()
        print(f"epoch {epoch}: accuracy {correct / len(test_set):.3f}")


if __name__ == "__main__":
    main()
