"""An NBD server that serves disk images the way EBS serves volumes restored from snapshots.

Not a test: a model for the VM benchmark (bench/prewarm.sh) and the VM suite. QEMU's NVMe disks
read through it (scripts/vm/run.sh --first-read-ms), with QEMU's throttling stacked on top for
the volume and instance caps. What it models, and where each rule comes from:

- A volume created from a snapshot fetches each block from S3 the first time it is read; until
  then a read of it has "a significant increase in latency", afterwards the volume performs
  normally ("Initialize Amazon EBS volumes", https://docs.aws.amazon.com/ebs/latest/userguide/
  initalize-volume.html; "Amazon EBS volume performance"). So: a read that touches a block not
  read before waits `latency` seconds; a read of blocks already read does not wait.
- Snapshot blocks are 512 KiB (block indexes are "in units of 512 KiB blocks": "Concepts for
  EBS direct APIs", https://docs.aws.amazon.com/ebs/latest/userguide/ebsapi-elements.html).
- Reads in flight overlap: the wait is per request and requests are served concurrently, so
  a reader with many I/Os outstanding gets many blocks fetched at once (the reason AWS's own
  example runs fio at iodepth 32), while a reader with one outstanding I/O is latency-bound.
  Two reads of the same block in flight share its fetch.
- Writes are written through and do not wait; they leave the map of fetched blocks alone.

The map of fetched blocks and the latency can be reset from inside the VM through the shared
work directory, so that one boot can measure several cold reads: the guest writes
"SEQ LATENCY_MS [EXPORT:BLOCK...]" to CONTROL_DIR/latency.ctl; the server forgets every fetched
block, takes the new latency and the blocks whose reads now fail with EIO (to test how readers
report a failed read), writes the counters of the epoch that ended to CONTROL_DIR/latency.stats
(JSON) and then SEQ to CONTROL_DIR/latency.ack.

    python3 bench/ebs_nbd.py --socket PATH --control-dir DIR --latency-ms MS NAME=IMAGE...

Listens on a unix socket only (nothing on the network). Speaks the fixed newstyle handshake
(NBD_OPT_GO, NBD_OPT_INFO, NBD_OPT_EXPORT_NAME) and simple replies, which is all QEMU needs:
https://github.com/NetworkBlockDevice/nbd/blob/master/doc/proto.md
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BLOCK = 512 * 1024

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPLY_MAGIC = 0x3E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698

FLAG_FIXED_NEWSTYLE = 1
FLAG_NO_ZEROES = 2
CLIENT_NO_ZEROES = 2

OPT_EXPORT_NAME = 1
OPT_ABORT = 2
OPT_LIST = 3
OPT_INFO = 6
OPT_GO = 7

REP_ACK = 1
REP_SERVER = 2
REP_INFO = 3
REP_ERR_UNSUP = 0x80000001
REP_ERR_UNKNOWN = 0x80000006

INFO_EXPORT = 0
INFO_BLOCK_SIZE = 3

TX_HAS_FLAGS = 1
TX_SEND_FLUSH = 4

CMD_READ = 0
CMD_WRITE = 1
CMD_DISC = 2
CMD_FLUSH = 3

EIO = 5
EINVAL = 22

MAX_PAYLOAD = 32 * 1024 * 1024


class ProtocolError(Exception):
    """The client sent something this server does not speak; the connection is dropped."""


@dataclass
class Export:
    name: str
    path: Path
    size: int
    fd: int
    fetched: bytearray
    # Blocks whose fetch is in progress: a second reader of the block waits for the same fetch.
    pending: dict[int, asyncio.Future[None]] = field(default_factory=dict)
    failing: set[int] = field(default_factory=set)
    cold_reads: int = 0
    warm_reads: int = 0
    bytes_read: int = 0
    bytes_written: int = 0

    @classmethod
    def open(cls, name: str, path: Path) -> Export:
        fd = os.open(path, os.O_RDWR)
        size = os.fstat(fd).st_size
        return cls(name, path, size, fd, bytearray((size + BLOCK - 1) // BLOCK))

    def forget(self) -> None:
        self.fetched = bytearray(len(self.fetched))
        self.failing = set()
        self.cold_reads = self.warm_reads = self.bytes_read = self.bytes_written = 0

    def stats(self) -> dict[str, int | str]:
        return {
            "image": str(self.path),
            "size": self.size,
            "blocks": len(self.fetched),
            "fetchedBlocks": sum(self.fetched),
            "coldReads": self.cold_reads,
            "warmReads": self.warm_reads,
            "bytesRead": self.bytes_read,
            "bytesWritten": self.bytes_written,
        }


class Model:
    def __init__(self, exports: dict[str, Export], latency: float, control_dir: Path) -> None:
        self.exports = exports
        self.latency = latency
        self.control_dir = control_dir

    async def fetch(self, export: Export, offset: int, length: int) -> None:
        """Wait as EBS does for the blocks of [offset, offset+length) not fetched yet."""
        first, last = offset // BLOCK, (offset + max(length, 1) - 1) // BLOCK
        cold = [b for b in range(first, last + 1) if not export.fetched[b]]
        if not cold:
            export.warm_reads += 1
            return
        export.cold_reads += 1
        loop = asyncio.get_running_loop()
        mine = [b for b in cold if b not in export.pending]
        waits = [export.pending[b] for b in cold if b in export.pending]
        done: asyncio.Future[None] = loop.create_future()
        for b in mine:
            export.pending[b] = done
        try:
            if mine and self.latency > 0:
                await asyncio.sleep(self.latency)
            for b in mine:
                export.fetched[b] = 1
        finally:
            for b in mine:
                export.pending.pop(b, None)
            done.set_result(None)
        for w in waits:
            await w

    def control(self, seq: str, latency_ms: float, failing: list[str]) -> None:
        stats = {
            "latencyMs": self.latency * 1000,
            "exports": {n: e.stats() for n, e in self.exports.items()},
        }
        write_atomic(self.control_dir / "latency.stats", json.dumps(stats, indent=1) + "\n")
        for e in self.exports.values():
            e.forget()
        for spec in failing:
            name, _, block = spec.partition(":")
            if name in self.exports and block.isdigit():
                self.exports[name].failing.add(int(block))
            else:
                print(f"ebs_nbd: ignored failing block {spec!r}", file=sys.stderr)
        self.latency = latency_ms / 1000
        write_atomic(self.control_dir / "latency.ack", seq + "\n")


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


async def read_exact(reader: asyncio.StreamReader, n: int) -> bytes:
    return await reader.readexactly(n)


async def option_reply(
    writer: asyncio.StreamWriter, option: int, kind: int, data: bytes = b""
) -> None:
    writer.write(struct.pack(">QIII", REPLY_MAGIC, option, kind, len(data)) + data)
    await writer.drain()


async def handshake(
    model: Model, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> Export | None:
    writer.write(struct.pack(">QQH", NBDMAGIC, IHAVEOPT, FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))
    await writer.drain()
    (client_flags,) = struct.unpack(">I", await read_exact(reader, 4))
    no_zeroes = bool(client_flags & CLIENT_NO_ZEROES)
    tx_flags = TX_HAS_FLAGS | TX_SEND_FLUSH
    while True:
        magic, option, length = struct.unpack(">QII", await read_exact(reader, 16))
        if magic != IHAVEOPT or length > 65536:
            raise ProtocolError(f"bad option header {magic:#x} length {length}")
        data = await read_exact(reader, length)
        if option == OPT_EXPORT_NAME:
            export = model.exports.get(data.decode(errors="replace"))
            if export is None:
                return None  # the protocol has no error reply here: hang up
            writer.write(struct.pack(">QH", export.size, tx_flags))
            if not no_zeroes:
                writer.write(bytes(124))
            await writer.drain()
            return export
        if option in (OPT_GO, OPT_INFO):
            (name_len,) = struct.unpack(">I", data[:4])
            name = data[4 : 4 + name_len].decode(errors="replace")
            export = model.exports.get(name)
            if export is None:
                await option_reply(writer, option, REP_ERR_UNKNOWN)
                continue
            (n_req,) = struct.unpack(">H", data[4 + name_len : 6 + name_len])
            wanted = struct.unpack(f">{n_req}H", data[6 + name_len : 6 + name_len + 2 * n_req])
            await option_reply(
                writer, option, REP_INFO, struct.pack(">HQH", INFO_EXPORT, export.size, tx_flags)
            )
            if INFO_BLOCK_SIZE in wanted:
                # 512-byte sectors, 1 MiB preferred, 32 MiB at most per request.
                await option_reply(
                    writer,
                    option,
                    REP_INFO,
                    struct.pack(">HIII", INFO_BLOCK_SIZE, 512, 1024 * 1024, MAX_PAYLOAD),
                )
            await option_reply(writer, option, REP_ACK)
            if option == OPT_GO:
                return export
            continue
        if option == OPT_LIST:
            for name in model.exports:
                raw = name.encode()
                await option_reply(writer, option, REP_SERVER, struct.pack(">I", len(raw)) + raw)
            await option_reply(writer, option, REP_ACK)
            continue
        if option == OPT_ABORT:
            await option_reply(writer, option, REP_ACK)
            return None
        # Structured replies, meta contexts, TLS: not offered; QEMU then uses simple replies.
        await option_reply(writer, option, REP_ERR_UNSUP)


@dataclass(frozen=True)
class Request:
    handle: bytes
    kind: int
    offset: int
    length: int
    payload: bytes


async def next_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request, or None when the client disconnects."""
    header = await read_exact(reader, 28)
    magic, _flags, kind, handle, offset, length = struct.unpack(">IHH8sQI", header)
    if magic != REQUEST_MAGIC:
        raise ProtocolError(f"bad request magic {magic:#x}")
    if kind == CMD_DISC:
        return None
    if kind in (CMD_READ, CMD_WRITE) and length > MAX_PAYLOAD:
        raise ProtocolError(f"request of {length} bytes")
    payload = await read_exact(reader, length) if kind == CMD_WRITE else b""
    return Request(handle, kind, offset, length, payload)


async def serve_request(
    model: Model, export: Export, writer: asyncio.StreamWriter, lock: asyncio.Lock, req: Request
) -> None:
    error, data = 0, b""
    first, last = req.offset // BLOCK, (req.offset + max(req.length, 1) - 1) // BLOCK
    if req.offset + req.length > export.size:
        error = EINVAL
    elif req.kind == CMD_READ and export.failing.intersection(range(first, last + 1)):
        error = EIO
    elif req.kind == CMD_READ:
        await model.fetch(export, req.offset, req.length)
        try:
            data = os.pread(export.fd, req.length, req.offset)
            export.bytes_read += req.length
        except OSError:
            error = EIO
        if len(data) != req.length and not error:
            error, data = EIO, b""
    elif req.kind == CMD_WRITE:
        try:
            os.pwrite(export.fd, req.payload, req.offset)
            export.bytes_written += req.length
        except OSError:
            error = EIO
    elif req.kind == CMD_FLUSH:
        try:
            os.fsync(export.fd)
        except OSError:
            error = EIO
    else:
        error = EINVAL
    async with lock:
        writer.write(struct.pack(">II8s", SIMPLE_REPLY_MAGIC, error, req.handle) + data)
        await writer.drain()


async def connection(
    model: Model, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    tasks: set[asyncio.Task[None]] = set()
    try:
        export = await handshake(model, reader, writer)
        if export is None:
            return
        lock = asyncio.Lock()
        while (req := await next_request(reader)) is not None:
            task = asyncio.create_task(serve_request(model, export, writer, lock, req))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
    except (asyncio.IncompleteReadError, ConnectionError, ProtocolError) as err:
        if not isinstance(err, asyncio.IncompleteReadError):
            print(f"ebs_nbd: connection dropped: {err}", file=sys.stderr)
    finally:
        for t in tasks:
            t.cancel()
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def watch_control(model: Model) -> None:
    """Apply each new control line the guest writes (polled: 9p has no change notification)."""
    ctl = model.control_dir / "latency.ctl"
    seen = ""
    while True:
        try:
            text = ctl.read_text().strip()
        except FileNotFoundError:
            text = ""
        if text and text != seen:
            seen = text
            parts = text.split()
            try:
                model.control(parts[0], float(parts[1]), parts[2:])
            except (IndexError, ValueError):
                print(f"ebs_nbd: ignored control line {text!r}", file=sys.stderr)
        await asyncio.sleep(0.02)


async def main_async(args: argparse.Namespace) -> None:
    exports: dict[str, Export] = {}
    for spec in args.exports:
        name, _, path = spec.partition("=")
        if not name or not path:
            raise SystemExit(f"ebs_nbd: export {spec!r} is not NAME=IMAGE")
        exports[name] = Export.open(name, Path(path))
    control_dir = Path(args.control_dir)
    model = Model(exports, args.latency_ms / 1000, control_dir)
    server = await asyncio.start_unix_server(lambda r, w: connection(model, r, w), path=args.socket)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watcher = asyncio.create_task(watch_control(model))
    write_atomic(control_dir / "latency.ready", f"{os.getpid()} {time.time():.3f}\n")
    async with server:
        await stop.wait()
    watcher.cancel()
    final = {
        "latencyMs": model.latency * 1000,
        "exports": {n: e.stats() for n, e in exports.items()},
    }
    write_atomic(control_dir / "latency.final", json.dumps(final, indent=1) + "\n")
    for e in exports.values():
        os.close(e.fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True, help="unix socket path to listen on")
    parser.add_argument("--control-dir", required=True, help="directory shared with the guest")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="first-read latency")
    parser.add_argument("exports", nargs="+", metavar="NAME=IMAGE")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
