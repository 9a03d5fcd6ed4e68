"""Faults the workflow tests inject into the emulation beyond the double's per-call ones."""

from __future__ import annotations

import io
import json
from typing import Any

from botocore.response import StreamingBody

from raidsnap_emulation.harness import Emulation


def crash(emu: Emulation, module: str, after: int = 0) -> None:
    """The function of this handler module fails outright (its runtime crashes) whenever the
    workflow invokes it, as an out-of-memory or timed-out invocation does; with ``after``, only
    once it has answered that many invocations."""
    router = emu.router
    assert router is not None
    name = next(n for n, f in router.functions.items() if f.handler.endswith(f".{module}.handler"))
    answered = [0]

    def invoke(params: dict[str, Any]) -> Any:
        if str(params["FunctionName"]).rsplit(":", 1)[-1] != name:
            return router(params)
        if answered[0] < after:
            answered[0] += 1
            return router(params)
        body = json.dumps({"errorType": "Runtime.ExitError", "errorMessage": "signal: killed"})
        return {
            "StatusCode": 200,
            "FunctionError": "Unhandled",
            "Payload": StreamingBody(io.BytesIO(body.encode()), len(body)),
        }

    emu.double.route("lambda", "Invoke", invoke)
