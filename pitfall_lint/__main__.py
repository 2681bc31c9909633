from pitfall_lint.cli import main

main()
