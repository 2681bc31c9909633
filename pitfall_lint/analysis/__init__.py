"""Facts several rules need (module classes, rank guards, distributed set-up), computed once per file."""
