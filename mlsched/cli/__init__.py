"""The ``mlsched`` command (docs/architecture.md): the entry point and dispatch
(:mod:`.entry`), the command table (:mod:`.commands`), what one invocation does
(:mod:`.config`), the parser pieces every command shares (:mod:`.parser`), and the bodies of
``simulate`` (:mod:`.simulate`) and ``demo`` (:mod:`.demo`). Each subsystem keeps the parser
and body of its own commands beside its code (``controller/cli.py``, ``testbed/cli.py``, ...).

:mod:`.parser` sits below every subsystem's command module, which builds on it; the rest of
this package sits above every part. The names below are imported on first use (PEP 562),
so that a subsystem importing :mod:`.parser` runs nothing of the rest, and ``mlsched
--help`` loads nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlsched.core.lazy import lazy_exports

if TYPE_CHECKING:
    from mlsched.cli.commands import get_args_parser
    from mlsched.cli.config import Config
    from mlsched.cli.entry import config_from_args, main, run
    from mlsched.cli.parser import EnvDefault

_MODULE_OF = {
    "Config": "config",
    "EnvDefault": "parser",
    "config_from_args": "entry",
    "get_args_parser": "commands",
    "main": "entry",
    "run": "entry",
}

__all__ = ["Config", "EnvDefault", "config_from_args", "get_args_parser", "main", "run"]

__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF, __all__, globals())
