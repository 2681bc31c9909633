from vit_pytorch.vit import ViT
