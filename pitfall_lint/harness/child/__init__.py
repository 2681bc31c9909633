"""Code that runs inside the verify children, next to torch and the user's code."""
