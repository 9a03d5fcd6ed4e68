"""What every emulation of a process reads the same way, read once per process.

Each test builds an emulation from scratch (moto's backends, the double, the clock), so that no
test sees another's state. What does not depend on any test's state but only on files that never
change during the run (botocore's service models, the parse of a state machine's definition
text) is kept here instead of being read again by every emulation and every execution.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import botocore.session
from botocore.loaders import Loader
from moto.stepfunctions.parser.asl.parse import asl_parser
from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

# One botocore loader per data path for the whole process (see shared_service_models).
_LOADERS: dict[str | None, Loader] = {}


@contextlib.contextmanager
def shared_service_models() -> Iterator[None]:
    """Every botocore session reads the service models it needs (JSON, megabytes for EC2) into a
    loader of its own, and moto starts each mock with a new default session: each emulation read
    them all again, in the test and in each execution. The sessions made meanwhile share one
    loader instead, whose answers botocore already shares read-only between the clients of a
    session; everything else about a session stays new."""
    original = botocore.session.create_loader

    def create_loader(search_path_string: str | None = None) -> Loader:
        loader = _LOADERS.get(search_path_string)
        if loader is None:
            loader = _LOADERS.setdefault(search_path_string, original(search_path_string))
        return loader

    botocore.session.create_loader = create_loader
    try:
        yield
    finally:
        botocore.session.create_loader = original


# Parse trees of the definitions seen so far (see definitions_parsed_once); a test that makes
# many definitions of its own only empties it now and then.
_PARSE_TREES: dict[str, Any] = {}
_PARSE_TREES_KEPT = 64


@contextlib.contextmanager
def definitions_parsed_once() -> Iterator[None]:
    """moto parses a definition's text with its ANTLR grammar when the state machine is created
    (to validate it) and again at every execution's start, and that parse was a good part of
    each test's time. The parse tree depends on the text alone and is only read afterwards, so
    it is kept per text; each execution still gets program components of its own, built from
    that tree as moto builds them. A text that fails to parse is parsed (and fails) each time."""
    parser = asl_parser.AmazonStateLanguageParser
    original = parser.__dict__["parse"]

    def parse(definition: str) -> tuple[Any, Any]:
        tree = _PARSE_TREES.get(definition)
        if tree is None:
            program, tree = original.__func__(definition)
            if len(_PARSE_TREES) >= _PARSE_TREES_KEPT:
                _PARSE_TREES.clear()
            _PARSE_TREES[definition] = tree
            return program, tree
        return Preprocessor().visit(tree), tree

    setattr(parser, "parse", staticmethod(parse))  # noqa: B010 - moto internals, pinned
    try:
        yield
    finally:
        setattr(parser, "parse", original)  # noqa: B010
