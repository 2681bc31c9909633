"""pitfall-lint: find PyTorch parallel-training pitfalls before they fail on a cluster."""

__version__ = "0.1.0"
