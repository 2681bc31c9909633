"""`pitfall-lint verify`: run the flagged code in parallel and confirm findings with evidence.

The CLI side (this package's top-level modules) never imports torch; the code that runs inside the
child processes lives in `child/` and is loaded there through `shim/sitecustomize.py`.
"""
