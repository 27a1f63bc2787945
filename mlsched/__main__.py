"""``python -m mlsched``: the same as the ``mlsched`` command."""

from mlsched.cli.entry import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
