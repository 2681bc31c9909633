import torch
from vit_pytorch import ViT

def test_vit():
    v = ViT(
        image_size = 32,
        patch_size = 8,
        num_classes = 10,
        dim = 32,
        depth = 2,
        heads = 4,
        mlp_dim = 64,
        dropout = 0.1,
        emb_dropout = 0.1
    )

    img = torch.randn(1, 3, 32, 32)

    preds = v(img)
    assert preds.shape == (1, 10), 'correct logits outputted'
