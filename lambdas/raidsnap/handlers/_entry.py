"""What every handler shares: Powertools context, metrics flush, throttling as a named error."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

from aws_lambda_powertools.utilities.typing import LambdaContext

from raidsnap.aws import throttling_as_named_error
from raidsnap.observability import logger, metrics, tracer

Handler = Callable[[dict[str, Any], LambdaContext], Any]


def entry(step: Callable[[dict[str, Any]], Any]) -> Handler:
    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler(capture_response=False)
    @metrics.log_metrics
    @functools.wraps(step)
    def handler(event: dict[str, Any], context: LambdaContext) -> Any:
        logger.debug("event", extra={"event": event})
        with throttling_as_named_error():
            return step(event)

    return cast(Handler, handler)
