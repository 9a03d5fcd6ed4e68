"""An automated recovery against the same restore run alone, on the emulation's clock.

Not a test: a measurement to read. Each row runs twice from the same start (an array backed up,
then one of its members lost): once as the alarm's automated recovery, which starts the restore
and waits for its report, once as an operator's restore of the same set onto the same instance.

- usable: from the start (the alarm's delivery, or the restore's start) to the moment the
  operator is told the array is mounted and usable: the recovery's end, or the restore's
  assemble seen to succeed.
- all done: until the last run ends (the restore, after its prewarm).
- ratio: recovery / restore alone. The recovery adds its own steps (the assessment on the
  instance, the target's check); nothing of it should wait for a poll.

    .venv/bin/python bench/recovery_time.py
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import boto3

from raidsnap_emulation.harness import Emulation, Execution, synthesize
from raidsnap_emulation.world import (
    ArrayFixture,
    alarm_event,
    backed_up,
    configure_recovery,
    make_array,
)

# (members, GiB each): the demo's array, and a larger one whose prewarm takes over an hour.
SHAPES = ((3, 32), (3, 1024))


@dataclass
class Timing:
    usable: float
    done: float


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The functions log and publish metrics to stdout: keep the table readable."""
    logging.disable(logging.CRITICAL)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield
    logging.disable(logging.NOTSET)


@contextlib.contextmanager
def lost_member(members: int, size_gib: int) -> Iterator[tuple[Emulation, ArrayFixture]]:
    """db1, backed up, recovery configured to replace in place, then a member lost."""
    with Emulation(synthesize()) as emu:
        fx = make_array(emu.hosts, "db1", members, size_gib=size_gib)
        backed_up(emu.hosts, emu.run, fx)
        configure_recovery(emu, "db1", instanceId=fx.instance_id, mode="replace")
        boto3.client("ec2").detach_volume(VolumeId=fx.member_ids[1], Force=True)
        emu.clock.advance(emu.double.detach_seconds + 1)
        emu.hosts.lose_member(fx.instance_id, fx.member_ids[1])
        yield emu, fx


def assembled_at(emu: Emulation) -> datetime:
    assert emu.router is not None
    for i in emu.router.invocations:
        result = i.result if isinstance(i.result, dict) else {}
        if str(result.get("document", "")).endswith("-assemble") and (
            result.get("status") == "success"
        ):
            return i.at
    raise RuntimeError("the restore never saw its assemble succeed")


def ended(run: Execution, begin: datetime) -> float:
    if run.status != "SUCCEEDED" or run.ended_at is None:
        raise RuntimeError(f"{run.arn}: {run.status} {run.error}: {run.cause}")
    return (run.ended_at - begin).total_seconds()


def recovery(members: int, size_gib: int) -> Timing:
    with lost_member(members, size_gib) as (emu, fx):
        begin = emu.clock.now()
        started = emu.invoke("recovery_start", alarm_event(fx.instance_id))
        run = emu.wait(str(started.result["executionArn"]), timeout=600)
        (restore,) = emu.sfn.list_executions(stateMachineArn=emu.state_machines["restore"])[
            "executions"
        ]
        nested = emu.wait(restore["executionArn"], timeout=600)
        return Timing(ended(run, begin), ended(nested, begin))


def restore_alone(members: int, size_gib: int) -> Timing:
    with lost_member(members, size_gib) as (emu, _):
        begin = emu.clock.now()
        run = emu.wait(
            emu.start("restore", {"array": "db1", "mode": "replace"}, name="alone"), timeout=600
        )
        done = ended(run, begin)
        return Timing((assembled_at(emu) - begin).total_seconds(), done)


def clock(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def main() -> int:
    lines = [
        f"{'array':<14}{'usable: recovery':>18}{'alone':>8}{'ratio':>7}"
        f"{'all done: recovery':>20}{'alone':>8}{'ratio':>7}"
    ]
    for members, size in SHAPES:
        with quiet():
            rec, alone = recovery(members, size), restore_alone(members, size)
        lines.append(
            f"{f'{members} x {size} GiB':<14}{clock(rec.usable):>18}{clock(alone.usable):>8}"
            f"{rec.usable / alone.usable:>6.2f}x{clock(rec.done):>20}{clock(alone.done):>8}"
            f"{rec.done / alone.done:>6.2f}x"
        )
    print("\n".join(lines))
    print(
        "\nusable: to the recovery's end (it ends as the array is mounted) or the restore's "
        "assemble; all done: to the restore's end after its prewarm; times are emulated m:ss"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
