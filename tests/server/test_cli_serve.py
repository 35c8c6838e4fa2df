"""`llamay serve` as a user runs it: a subprocess that prints its URL once it answers, serves, and stops on
Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests import paths

pytestmark = pytest.mark.native_only


def serve(*args: str) -> tuple[subprocess.Popen, str]:
    """`llamay serve` on a free port, and its URL once it answers (stderr is left in the pipe for the test)."""
    cmd = [sys.executable, "-m", "llamay.native.cli", "serve", "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(120)
    if not line or not line[0].startswith("http://"):
        proc.kill()
        raise AssertionError(f"no URL printed: {line!r} {proc.stderr.read()[-2000:]}")
    return proc, line[0].strip()


def test_serve_prints_its_url_serves_and_stops():
    proc, url = serve("-m", str(paths.stories("f32")), "--parallel", "2", "--queue", "4", "-c", "256")
    try:
        assert url.startswith("http://127.0.0.1:")  # loopback by default
        with httpx.Client(base_url=url, timeout=60) as c:
            assert c.get("/health").json()["model"] == "stories260K-f32"
            r = c.post("/v1/completions", json={"model": "stories260K-f32", "prompt": "Once upon a time",
                                                "max_tokens": 8, "temperature": 0})  # fmt: skip
            assert r.json()["choices"][0]["text"].startswith(", there was")
            assert c.get("/openapi.json").json()["info"]["title"] == "llamay"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode in (0, 130, -signal.SIGINT)  # 130: stopped by Ctrl-C, after a graceful shutdown


def test_serve_with_an_api_key_from_the_environment():
    env = {**os.environ, "LLAMAY_API_KEY": "k"}
    cmd = [sys.executable, "-m", "llamay.native.cli", "serve", "--port", "0", "-m", str(paths.stories("q8_0")),
           "--parallel", "1", "-c", "128"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://")
        assert httpx.get(f"{url}/v1/models", timeout=30).status_code == 401
        assert httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer k"}, timeout=30).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def test_serve_refuses_bad_arguments(capsys):
    from llamay.native.cli import main

    assert main(["serve", "-m", str(paths.stories("f32")), "--parallel", "0"]) == 1
    assert "--parallel" in capsys.readouterr().err
    assert main(["serve", "-m", "/nonexistent/model.gguf"]) == 1


def _stop(proc: subprocess.Popen) -> str:
    """Ctrl-C, then the process's whole stderr."""
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return err


def test_ctrl_c_during_a_stream_ends_it_cleanly_in_one_line():
    """Ctrl-C used to wait 5 s for the stream, then cancel it with a traceback. Now the running requests end at
    once (a stream gets an error event, then [DONE]), the server says so in one line, and exits with 130."""
    proc, url = serve("-m", str(paths.stories("f32")), "--backend", "portable", "-c", "512", "--parallel", "2")
    lines: list[str] = []
    started = threading.Event()

    def stream() -> None:
        body = {"model": "stories260K-f32", "prompt": "Once", "max_tokens": 500, "stream": True}
        with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=60) as r:
            for line in r.iter_lines():
                lines.append(line)
                if line.startswith("data: {"):
                    started.set()

    t = threading.Thread(target=stream)
    t.start()
    assert started.wait(60)
    err = _stop(proc)
    t.join(30)
    assert proc.returncode == 130, err
    # before: uvicorn waited its 5 s graceful timeout, then cancelled the stream ("ERROR: Cancel 1 running task(s)")
    # with a traceback, and the client saw a broken connection
    assert "Traceback" not in err and "ERROR" not in err, err
    said = [line for line in err.splitlines() if "stopping" in line]
    assert said == ["llamay serve: stopping (SIGINT): ending 1 running and 0 queued requests"], err
    # the request log: the stream's one line, its tokens counted at its end (the prompt's BOS and "Once": 2 in)
    logged = [line for line in err.splitlines() if line.startswith("llamay serve: POST /v1/completions 200")]
    assert len(logged) == 1 and re.search(r" in=2 out=\d+ \d+ ms$", logged[0]), err
    events = [line for line in lines if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]" and "shutting down" in events[-2], events[-3:]


def test_a_client_gone_from_a_non_streaming_request_is_one_line_and_cancels_its_job():
    proc, url = serve("-m", str(paths.stories("f32")), "--backend", "portable", "-c", "512", "--parallel", "2",
                      "--quiet")  # fmt: skip
    try:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        for path, body in [("/v1/completions", {"model": "stories260K-f32", "prompt": "Once", "max_tokens": 400}),
                           ("/api/generate", {"model": "stories260K-f32", "prompt": "Once", "stream": False,
                                              "options": {"num_predict": 400}})]:  # fmt: skip
            data = json.dumps(body).encode()
            with socket.create_connection((host, int(port))) as s:
                s.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(data)}\r\n\r\n".encode() + data)  # fmt: skip
                time.sleep(1.0)  # generating (the portable backend takes seconds for 400 tokens)
            deadline = time.monotonic() + 20
            while httpx.get(f"{url}/health", timeout=10).json()["running"]:  # its sequence is given back
                assert time.monotonic() < deadline, "the job of the gone client is still running"
                time.sleep(0.1)
    finally:
        err = _stop(proc)
    assert "Traceback" not in err and "CancelledError" not in err, err
    gone = [line for line in err.splitlines() if "went away" in line]
    assert gone == ["llamay serve: the client went away before its reply: cancelled 1 of 1 choices"] * 2, err
    assert not any(" /health " in line for line in err.splitlines()), err  # --quiet: no request log
