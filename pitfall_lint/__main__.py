from pitfall_lint.cli import run

run()
