"""``python -m mlsched.agent --controller HOST:PORT ...``: the agent without the ``mlsched`` CLI."""

from __future__ import annotations

import argparse
import sys

from mlsched.agent.cli import add_agent_args, run_agent


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mlsched.agent", description="Run this machine's mlsched node agent."
    )
    add_agent_args(parser)
    return run_agent(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
