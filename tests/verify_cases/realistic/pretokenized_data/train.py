"""Trains a small language model on the pretokenized shards, on every GPU of the node.

    python tokens.py pretokenize && python train.py
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from tokens import PretokDataset

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Embedding(512, 64), nn.Linear(64, 512)).to(device)
if torch.cuda.device_count() > 1:
    model = nn.DataParallel(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
loader = torch.utils.data.DataLoader(PretokDataset("train", max_seq_len=64), batch_size=8)
for step, (x, y) in enumerate(loader):
    x, y = x.to(device), y.to(device)
    loss = F.cross_entropy(model(x).view(-1, 512), y.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step == 100:
        break
