"""A server process for a test: started in its own process group with its
output in a log file, ready when a URL answers 200, stopped with its whole
group. Shared by the browser tests (JupyterLab), the hub test (JupyterHub)
and anything else a test starts and talks to over HTTP."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoggedServer:
    def __init__(self, name: str, log_path: Path):
        self.name, self.log_path = name, Path(log_path)
        self.proc: subprocess.Popen | None = None
        self._log = None

    def start(self, cmd: list[str], ready_url: str, *, cwd: Path, env: dict, headers: dict | None = None,
              timeout: float = 120) -> None:
        """Start `cmd` and wait until `ready_url` answers 200; raise with the
        log's tail if the process exits or the URL stays silent."""
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(urllib.request.Request(ready_url, headers=headers or {}), timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer on {ready_url} within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, grace_s: float = 20) -> None:
        """SIGTERM the server's process group (the server and what it started), then SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._log.close()

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return f"(no {self.name} log)"
