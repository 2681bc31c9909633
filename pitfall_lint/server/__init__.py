"""`pitfall-lint server`, the Language Server for editors: session.py finds what `check` finds in the open
documents, protocol.py speaks the protocol (pygls, installed with the `server` extra)."""
