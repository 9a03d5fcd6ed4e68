"""Deleting the stack turns off the FSR it keeps on: the sweeper, as the stack's custom resource,
answers CloudFormation's Delete at the request's presigned URL (here a loopback server)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from unittest import mock

import pytest
from test_kept_fsr import backup, kept_array, states

from raidsnap.aws import stacks
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.template import STACK_ID
from raidsnap_emulation.world import HeldStep


class Responses:
    """What was PUT at the ResponseURL, as CloudFormation's presigned S3 URL would receive it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.content_types: list[str | None] = []
        responses = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                responses.bodies.append(json.loads(self.rfile.read(length)))
                responses.content_types.append(self.headers.get("Content-Type"))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                del args

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/response?signed=1"


@contextlib.contextmanager
def serving(r: Responses) -> Iterator[Responses]:
    """Serve ``r`` on loopback, and let the sweeper answer there: in production it answers
    only at an https URL (stacks.RESPONSE_URL_PREFIXES)."""
    thread = threading.Thread(target=r.server.serve_forever, daemon=True)
    thread.start()
    try:
        with mock.patch.object(stacks, "RESPONSE_URL_PREFIXES", (r.url.split("/response")[0],)):
            yield r
    finally:
        r.server.shutdown()
        r.server.server_close()


@pytest.fixture
def responses() -> Iterator[Responses]:
    with serving(Responses()) as r:
        yield r


def request(kind: str, url: str) -> dict[str, Any]:
    return {
        "RequestType": kind,
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:raidsnap-Sweep",
        "ResponseURL": url,
        "StackId": STACK_ID,
        "RequestId": "5d478078-13e9-baf0-464a-7ef285ecc786",
        "LogicalResourceId": "RaidsnapFsrOffWhenDeleted",
        "ResourceType": "Custom::RaidsnapFsrOffWhenDeleted",
        "ResourceProperties": {},
        **({"PhysicalResourceId": "raidsnap-fsr-off-when-the-stack-is-deleted"}
           if kind != "Create" else {}),
    }  # fmt: skip


def test_deleting_the_stack_turns_off_the_fsr_a_policy_keeps(
    emu: Emulation, responses: Responses
) -> None:
    # GIVEN db1's policy keeps FSR on its newest set
    kept_array(emu)
    ids = backup(emu).output["snapshotIds"]
    assert states(ids) == dict.fromkeys(ids, "enabled")
    # WHEN the stack is being deleted and CloudFormation sends the custom resource its Delete
    emu.double.stacks[STACK_ID] = "DELETE_IN_PROGRESS"
    answered = emu.invoke("sweep", request("Delete", responses.url))
    # THEN the pairs go off, and CloudFormation is told SUCCESS at its URL
    assert answered.error_type is None, answered.error_message
    assert set(states(ids).values()) <= {"disabling", "disabled"}
    [body] = responses.bodies
    assert body["Status"] == "SUCCESS", body
    assert "1 sets a fastRestore policy kept" in body["Reason"]
    assert body["PhysicalResourceId"] == "raidsnap-fsr-off-when-the-stack-is-deleted"
    assert (body["StackId"], body["LogicalResourceId"]) == (STACK_ID, "RaidsnapFsrOffWhenDeleted")
    assert body["RequestId"] == "5d478078-13e9-baf0-464a-7ef285ecc786"
    # presigned for an empty content type (CloudFormation User Guide, custom resource response)
    assert responses.content_types == [""]


@pytest.mark.parametrize(
    ("kind", "stack_status"),
    [
        ("Create", "CREATE_IN_PROGRESS"),
        ("Update", "UPDATE_IN_PROGRESS"),
        # the resource removed from the template by an update: not the stack's deletion
        ("Delete", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS"),
    ],
)
def test_anything_but_the_stack_s_deletion_leaves_the_fsr_on(
    emu: Emulation, responses: Responses, kind: str, stack_status: str
) -> None:
    kept_array(emu)
    ids = backup(emu).output["snapshotIds"]
    emu.double.stacks[STACK_ID] = stack_status

    answered = emu.invoke("sweep", request(kind, responses.url))

    assert answered.error_type is None, answered.error_message
    assert states(ids) == dict.fromkeys(ids, "enabled")
    [body] = responses.bodies
    assert (body["Status"], body["Reason"]) == ("SUCCESS", "nothing to do")
    assert body["PhysicalResourceId"] == "raidsnap-fsr-off-when-the-stack-is-deleted"


def test_a_running_restore_stops_the_deletion_named_and_nothing_is_turned_off(
    emu: Emulation, responses: Responses
) -> None:
    # GIVEN the kept set is being restored: the run is RUNNING (held while EC2 creates its
    # volumes) and holds the set in its lock
    kept_array(emu)
    run = backup(emu)
    ids = run.output["snapshotIds"]
    held = HeldStep(emu, "restore_check_volumes")
    arn = emu.start("restore", {"array": "db1", "mode": "replace"})
    held.wait()
    try:
        emu.double.stacks[STACK_ID] = "DELETE_IN_PROGRESS"
        # WHEN the stack's Delete comes
        emu.invoke("sweep", request("Delete", responses.url))
        # THEN nothing is turned off (a retry once the run has ended does it all), and
        # CloudFormation is told FAILED with the run named and what to do
        assert states(ids) == dict.fromkeys(ids, "enabled")
        [body] = responses.bodies
        assert body["Status"] == "FAILED", body
        assert arn in body["Reason"] and "turned nothing off" in body["Reason"]
        assert "delete the stack again" in body["Reason"]
    finally:
        held.release()
    assert emu.wait(arn).status == "SUCCEEDED"
    # AND once it has ended, deleting again turns the kept set off
    with serving(Responses()) as again:
        emu.invoke("sweep", request("Delete", again.url))
    assert again.bodies[0]["Status"] == "SUCCESS", again.bodies
    assert set(states(ids).values()) <= {"disabling", "disabled"}
