"""Each in-process Lambda invocation sees its function's environment, and nothing else of the
process changes.

A Lambda function runs in its own execution environment with the variables its template gives
it. The emulation runs every function in this one process, from the executor's threads. Setting
a function's variables on the process environment for the length of an invocation races with
every other thread that reads the environment whole (botocore copies ``os.environ`` each time it
builds a credential chain): a key removed by one thread between another's listing and reading
raised KeyError there. Instead, ``os.environ`` is replaced by a mapping that puts, for the thread
running an invocation only, that function's variables over the process's own.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

_REMOVED = object()


class ThreadEnviron(MutableMapping[str, str]):
    """The process environment, with a per-thread overlay while an invocation runs there."""

    def __init__(self, base: MutableMapping[str, str]) -> None:
        self.base = base
        self._local = threading.local()

    def _overlay(self) -> dict[str, Any] | None:
        return getattr(self._local, "overlay", None)

    @contextlib.contextmanager
    def overlay(self, values: Mapping[str, str]) -> Iterator[None]:
        """In this thread, until the block ends: ``values`` over the process environment (what
        the invocation sets or removes stays in its overlay)."""
        saved = self._overlay()
        self._local.overlay = dict(values)
        try:
            yield
        finally:
            self._local.overlay = saved

    @contextlib.contextmanager
    def adding(self, values: Mapping[str, str]) -> Iterator[None]:
        """In this thread, until the block ends: ``values`` over what the thread sees now (its
        invocation's overlay, if any, stays beneath)."""
        saved = self._overlay()
        self._local.overlay = {**(saved or {}), **values}
        try:
            yield
        finally:
            self._local.overlay = saved

    def __getitem__(self, key: str) -> str:
        layer = self._overlay()
        if layer is not None and key in layer:
            value = layer[key]
            if value is _REMOVED:
                raise KeyError(key)
            return str(value)
        return self.base[key]

    def __setitem__(self, key: str, value: str) -> None:
        layer = self._overlay()
        if layer is not None:
            layer[key] = value
        else:
            self.base[key] = value

    def __delitem__(self, key: str) -> None:
        layer = self._overlay()
        if layer is None:
            del self.base[key]
            return
        if key not in self:
            raise KeyError(key)
        layer[key] = _REMOVED

    def _keys(self) -> list[str]:
        layer = self._overlay()
        keys = list(self.base.copy()) if hasattr(self.base, "copy") else list(self.base)
        if layer is None:
            return keys
        seen = [k for k in keys if layer.get(k, None) is not _REMOVED]
        return seen + [k for k, v in layer.items() if v is not _REMOVED and k not in keys]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def copy(self) -> dict[str, str]:
        """What ``os.environ.copy()`` gives: a plain dict of what this thread sees."""
        layer = self._overlay()
        out = dict(self.base.copy()) if hasattr(self.base, "copy") else dict(self.base)
        for key, value in (layer or {}).items():
            if value is _REMOVED:
                out.pop(key, None)
            else:
                out[key] = str(value)
        return out


_LOCK = threading.Lock()


def thread_environ() -> ThreadEnviron:
    """The process's ThreadEnviron, installed as ``os.environ`` on first use."""
    with _LOCK:
        current = os.environ
        if isinstance(current, ThreadEnviron):
            return current
        replaced = ThreadEnviron(current)
        os.environ = replaced  # type: ignore[assignment]  # noqa: B003 - replaced on purpose, kept whole
        return replaced
