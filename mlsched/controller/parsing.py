"""Parsing submitted documents away from the controller's own process.

JSON goes through Python's C parser in the controller (a megabyte in milliseconds). YAML
goes to a worker process: PyYAML's bounded loader is pure Python, and a megabyte of YAML
costs a third of a second of CPU, which in the controller would be a third of a second of
held interpreter lock that every heartbeat waits on. In the worker it costs a core, not the
controller's responsiveness, and the worker may use libyaml (three times faster, but a
deeply nested document can overflow its C stack): a document that takes longer than
``timeout_s`` is refused and the worker replaced, and so is one that makes the worker die.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import multiprocessing as mp
import threading
from typing import Any

from mlsched.core.documents import decode, load_document
from mlsched.core.errors import SpecError

__all__ = ["DocumentParser"]

log = logging.getLogger(__name__)


def _load(data: str, where: str) -> Any:
    return load_document(data, where=where, isolated=True)


class DocumentParser:
    """Parses documents: JSON here, YAML in one worker process (started on first use)."""

    def __init__(self, *, timeout_s: float = 20.0) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()  # one YAML document at a time: one core at most
        self._pool: cf.ProcessPoolExecutor | None = None

    def parse(self, data: str | bytes, *, where: str) -> Any:
        text = decode(data, where=where)  # size and UTF-8 first, for either format
        if text.lstrip()[:1] in ("[", "{"):
            try:
                return load_document(text, where=where, json_only=True)
            except SpecError:
                pass  # flow-style YAML that is not JSON ([{job_id: a}]): the worker reads it
        with self._lock:
            pool = self._pool = self._pool or cf.ProcessPoolExecutor(
                max_workers=1, mp_context=mp.get_context("spawn")
            )
            future = pool.submit(_load, text, where)
            try:
                return future.result(timeout=self.timeout_s)
            except SpecError:
                raise
            except cf.TimeoutError:
                self._reset()
                raise SpecError(
                    "document", where, f"a document that parses within {self.timeout_s:g} s"
                ) from None
            except Exception as err:  # the worker died (a crash in a parser) or failed
                self._reset()
                log.warning("[intake] document parser failed: %s", err)
                raise SpecError("document", where, "a document the parser can read") from None

    def _reset(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.kill()  # a worker stuck in a parse would never see a shutdown
            pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._lock:
            self._reset()
