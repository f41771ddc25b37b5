"""Main loop of a worker process (``python -m autocutlass.search._child HANDLER FD_IN FD_OUT``).

``HANDLER`` is ``module:factory``; ``factory()`` returns a callable taking one request (plain
data) and returning one reply (plain data). The loop reads requests from ``FD_IN`` and writes
replies to ``FD_OUT`` (``multiprocessing.connection`` framing, JSON payloads).

The first message is ``{"ready": true}`` once the handler is loaded (so that start-up time does
not count against a request's deadline). Reply envelope: ``{"result": ...}``, or ``{"error": traceback, "type": name}`` when the handler
raised (a bug: the parent re-raises it). A handler that sets ``"exit": True`` in its result
(for instance after a CUDA fault poisoned its context) makes this process exit after replying.
The environment (``CUDA_VISIBLE_DEVICES``, ``CUTE_DSL_ARCH``) was set by the parent when it
started the process, before anything here was imported.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from multiprocessing.connection import Connection


def _load(spec: str):  # noqa: ANN202 - returns the handler factory
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"handler spec must be 'module:factory', got {spec!r}")
    return getattr(importlib.import_module(module_name), attr)


def main(argv: list[str]) -> int:
    spec, fd_in, fd_out = argv[0], int(argv[1]), int(argv[2])
    conn_in = Connection(fd_in, writable=False)
    conn_out = Connection(fd_out, readable=False)
    try:
        handler = _load(spec)()
    except Exception as e:  # noqa: BLE001 - reported to the parent, which raises WorkerError
        conn_out.send_bytes(json.dumps({"error": traceback.format_exc(), "type": type(e).__name__}).encode())
        return 1
    conn_out.send_bytes(json.dumps({"ready": True}).encode())
    while True:
        try:
            raw = conn_in.recv_bytes()
        except EOFError:
            return 0
        request = json.loads(raw)
        try:
            reply = {"result": handler(request)}
        except Exception as e:  # noqa: BLE001 - a handler bug is reported to the parent, which re-raises
            reply = {"error": traceback.format_exc(), "type": type(e).__name__}
        conn_out.send_bytes(json.dumps(reply).encode())
        if "error" in reply or (isinstance(reply.get("result"), dict) and reply["result"].get("exit")):
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
