"""`llamay serve` as a user runs it: a subprocess that prints its URL once it answers, serves, and stops on
Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import httpx
import pytest

from tests import paths

pytestmark = pytest.mark.native_only


def serve(*args: str) -> tuple[subprocess.Popen, str]:
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
