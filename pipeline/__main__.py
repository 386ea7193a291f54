"""`python -m pipeline ...`: the same as the `delegate-debugger` command (pipeline.cli)."""

from pipeline.cli import main

if __name__ == "__main__":
    main()
