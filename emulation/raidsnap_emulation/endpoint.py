"""The local world's AWS endpoint: AWS's own wire protocols on loopback, each call answered
through the emulation's double, exactly as the executions' own calls are.

The double sits in botocore, in this process (double/__init__.py): a request that reached moto's
HTTP server directly would skip it, and be answered without snapshot progress, Fast Snapshot
Restore, command results or volume states. So a request is read as the service reads it (moto's
request parsers, driven by the botocore service model: the EC2 and Query protocols' form fields,
the JSON protocol's body, the REST-JSON protocol's path and body), made as the same call
through a botocore client of this process (the double answers it, or hands it to moto), and its
answer or error is written back as the service writes it (moto's response serializers), with
the Date header of the emulated clock. An AWS SDK or the AWS CLI talks to it given its URL
(AWS_ENDPOINT_URL, --endpoint-url) and any keys; raidsnap's command does so with --local.

The service is the one the request was signed for: the credential scope of its SigV4
Authorization header, "access_key/YYYYMMDD/region/service/aws4_request" (STS API Reference,
Common Parameters, X-Amz-Credential; the same scope in the header). The operation is the Query
and EC2 protocols' Action parameter (same page, Action; Amazon EC2 API Reference, Making API
requests), the JSON protocol's X-Amz-Target header ("the version of the API and the
operation", AWS Transfer Family User Guide, Making API requests; the botocore model's
targetPrefix), or for REST-JSON the method and path of the model's requestUri. Paths under
``/_raidsnap/`` are the world's own controls, for the ``raidsnap local`` commands; they need
the world's token.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from email.message import Message
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import boto3
from botocore.client import BaseClient
from botocore.exceptions import ClientError, ParamValidationError
from moto.core.parse import PROTOCOL_PARSERS
from moto.core.serialize import get_serializer_class
from moto.core.utils import get_service_model

# What the local world answers: the services raidsnap, its command and its functions use.
SERVED = (
    "autoscaling",
    "cloudformation",
    "dynamodb",
    "ec2",
    "events",
    "iam",
    "kms",
    "lambda",
    "logs",
    "secretsmanager",
    "service-quotas",
    "sns",
    "ssm",
    "stepfunctions",
    "sts",
)
CONTROL_PREFIX = "/_raidsnap/"
TOKEN_HEADER = "X-Raidsnap-Token"  # noqa: S105 - the header's name
LOOPBACK = "127.0.0.1"

_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/[^/]+/([^/]+)/aws4_request")

Control = Callable[[str, dict[str, Any]], dict[str, Any]]
"""(control name, request body) -> answer; raises ControlError."""


class ControlError(Exception):
    """A control request the world cannot carry out; the message says why."""


class _ServiceError(Exception):
    """An AWS error as moto's serializers write it (they read ``code`` and ``message``)."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


class AwsFront:
    """Turns one HTTP request into one botocore call of this process, and its answer back."""

    def __init__(self, region: str) -> None:
        self.region = region
        self._models = {name: get_service_model(name) for name in SERVED}
        self._by_signing_name = {m.signing_name: name for name, m in self._models.items()}
        self._clients: dict[str, BaseClient] = {}
        self._lock = threading.Lock()

    def answer(self, method: str, target: str, headers: Message, body: bytes) -> Reply:
        found = _SCOPE.search(str(headers.get("Authorization", "")))
        service = self._by_signing_name.get(found.group(1)) if found else None
        if service is None:
            served = ", ".join(SERVED)
            scope = found.group(1) if found else "none"
            return _plain(400, f"the local world answers signed requests for {served}: {scope}")
        model = self._models[service]
        path, _, query = target.partition("?")
        try:
            operation, url_params = self._operation(model, method, path, headers, (body, query))
        except LookupError as err:
            return _plain(400, f"{service}: {err}")
        operation_model = model.operation_model(operation)
        parser = PROTOCOL_PARSERS[model.protocol](operation_model, map_type=dict)
        values = dict(parse_qsl(query, keep_blank_values=True))
        if model.protocol in ("ec2", "query"):
            values.update(parse_qsl(body.decode(), keep_blank_values=True))
        # moto's parsers read values and headers with .get() only: plain mappings do.
        request: Any = {
            "method": method,
            "values": values,
            "headers": headers,
            "body": body,
            "url_path": path,
            "url_params": url_params,
        }
        params = parser.parse(request)
        serializer = get_serializer_class(service, model.protocol)(operation_model)
        result, date = self._call(service, operation, params)
        reply = serializer.serialize(result)
        status = result.status if isinstance(result, _ServiceError) else reply["status_code"]
        out = {str(k): str(v) for k, v in reply["headers"].items()}
        out["x-amzn-RequestId"] = str(uuid.uuid4())
        if date:
            out["Date"] = date
        raw = reply["body"]
        return Reply(status, out, raw if isinstance(raw, bytes) else str(raw).encode())

    @staticmethod
    def _operation(
        model: Any, method: str, path: str, headers: Message, sent: tuple[bytes, str]
    ) -> tuple[str, dict[str, str]]:
        """The operation the request asks for, and the values its REST path carries."""
        body, query = sent
        if model.protocol == "json":
            target = str(headers.get("X-Amz-Target", ""))
            if not target:
                raise LookupError("no X-Amz-Target header")
            return target.rsplit(".", 1)[-1], {}
        if model.protocol in ("ec2", "query"):
            fields = dict(parse_qsl(query)) | dict(parse_qsl(body.decode()))
            if "Action" not in fields:
                raise LookupError("no Action")
            return fields["Action"], {}
        for name in model.operation_names:
            http = model.operation_model(name).http
            if http.get("method") != method:
                continue
            matched = _uri_pattern(str(http.get("requestUri", ""))).fullmatch(path)
            if matched:
                return name, {k: unquote(v) for k, v in matched.groupdict().items()}
        raise LookupError(f"no operation for {method} {path}")

    def _call(self, service: str, operation: str, params: dict[str, Any]) -> tuple[Any, str]:
        """The call through this process's botocore (and so through the double)."""
        try:
            client: Any = self._client(service)
            answer = dict(client._make_api_call(operation, params))
        except ClientError as err:
            error = err.response.get("Error", {})
            meta = err.response.get("ResponseMetadata", {})
            status = int(meta.get("HTTPStatusCode") or 400)
            failed = _ServiceError(str(error.get("Code")), str(error.get("Message", "")), status)
            return failed, str(meta.get("HTTPHeaders", {}).get("date", ""))
        except ParamValidationError as err:
            return _ServiceError("ValidationException", str(err), 400), ""
        meta = answer.pop("ResponseMetadata", {})
        for key, value in answer.items():
            if hasattr(value, "read"):  # a streamed payload (Lambda Invoke) goes out whole
                answer[key] = value.read()
        return answer, str(meta.get("HTTPHeaders", {}).get("date", ""))

    def _client(self, service: str) -> BaseClient:
        with self._lock:
            if service not in self._clients:
                self._clients[service] = boto3.client(service, region_name=self.region)  # type: ignore[call-overload]
            return self._clients[service]


def _uri_pattern(uri: str) -> re.Pattern[str]:
    """A REST request URI template as a pattern: ``{Name}`` one path segment, ``{Name+}`` the
    rest of the path (Smithy httpLabel, greedy labels)."""
    path = uri.split("?", 1)[0]
    pattern = ""
    for part in re.split(r"(\{[^}]+\})", path):
        if part.startswith("{"):
            name = part.strip("{}")
            greedy = name.endswith("+")
            pattern += f"(?P<{name.rstrip('+')}>{'.+' if greedy else '[^/]+'})"
        else:
            pattern += re.escape(part)
    return re.compile(pattern)


def _plain(status: int, text: str) -> Reply:
    return Reply(status, {"Content-Type": "text/plain; charset=utf-8"}, text.encode())


def _handler(
    front: AwsFront, control: Control, token: str, now: Callable[[], datetime]
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_PUT(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.path.startswith(CONTROL_PREFIX):
                reply = _control(control, token, self.path, self.headers, body)
            else:
                reply = front.answer(self.command, self.path, self.headers, body)
            # One Date header, the world's (send_response would add this machine's).
            self.send_response_only(reply.status)
            headers = {"Date": format_datetime(now(), usegmt=True), **reply.headers}
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        def log_message(self, format: str, *args: Any) -> None:
            """Requests are not logged: the world's log is for what goes wrong."""

    return Handler


def _control(control: Control, token: str, path: str, headers: Message, body: bytes) -> Reply:
    if headers.get(TOKEN_HEADER) != token:
        return _plain(403, "this local world's controls need its token (its state file)")
    name = urlsplit(path).path[len(CONTROL_PREFIX) :]
    try:
        answer = control(name, json.loads(body or b"{}"))
    except ControlError as err:
        return _json_reply(400, {"error": str(err)})
    except ValueError as err:
        return _json_reply(400, {"error": f"not JSON: {err}"})
    return _json_reply(200, answer)


def _json_reply(status: int, payload: dict[str, Any]) -> Reply:
    body = json.dumps(payload, default=str).encode()
    return Reply(status, {"Content-Type": "application/json"}, body)


@contextlib.contextmanager
def serving(
    region: str, control: Control, token: str, now: Callable[[], datetime], port: int = 0
) -> Iterator[str]:
    """Serve on loopback (a free port unless ``port``) inside the block; yields the URL.
    ``now``: the world's time, for the Date header of answers that carry none of their own."""
    handler = _handler(AwsFront(region), control, token, now)
    server = ThreadingHTTPServer((LOOPBACK, port), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="local-endpoint", daemon=True)
    thread.start()
    try:
        yield f"http://{LOOPBACK}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
