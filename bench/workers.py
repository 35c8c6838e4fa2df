"""Worker processes of the JSONSchemaBench scripts (json_schema_bench.py, jsonschemabench.py): one request per
line of JSON in, one record per line out, so that each engine (or checkout) runs in its own process, under the
same load as the others, and a crash or a memory kill loses one schema, not the run."""

from __future__ import annotations

import json
import os
import subprocess


class Timeout(Exception):
    """A schema's time is up (raised from SIGALRM inside a worker)."""


def alarm(*_: object) -> None:
    raise Timeout


class WorkerProcess:
    """One worker (`cmd`), started on first use and restarted when it has died."""

    def __init__(self, cmd: list[str]) -> None:
        self.cmd = cmd
        self.proc: subprocess.Popen | None = None

    def send(self, req: dict) -> None:
        if self.proc is None or self.proc.poll() is not None:
            env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # another checkout is only read
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.proc = None
            return {"status": "crash", "msg": "the worker died (killed for memory?)", "cpu": 0.0}
        return json.loads(line)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()
