"""Trains the small GPT of model.py on random tokens for a few steps.

    python train.py
"""

import torch
import torch.nn.functional as F

from model import GPT

model = GPT(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
for step in range(10):
    idx = torch.randint(0, 64, (4, 16))
    logits = model(idx)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, 64), idx[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
