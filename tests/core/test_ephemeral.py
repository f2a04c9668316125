"""The watchdog that stops Prefect's ephemeral server when the build process is SIGKILLed.

The end-to-end case (a real CLI build, a real server) is in test_cli.py's kill test; this one
checks the watchdog's own rules in ~2 s, with stand-in processes: the registered pid is stopped
when its owner dies however it dies, and a pid whose command line is not the Prefect server (a
recycled pid) is left alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import psutil

SLEEP = "import time; time.sleep(120)"


def sleeper(*marker: str) -> subprocess.Popen:
    # the extra argv shows up in /proc/<pid>/cmdline, which is what the watchdog checks
    return subprocess.Popen([sys.executable, "-c", SLEEP, *marker])


def test_registered_server_stops_when_its_owner_is_killed_and_others_survive():
    server = sleeper("prefect.server.api.server")  # stand-in for the uvicorn child
    innocent = sleeper("some-other-program")  # e.g. the server's pid, recycled
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from forenset.flows.ephemeral import stop_with_this_process
                stop_with_this_process({server.pid})
                stop_with_this_process({innocent.pid})
                stop_with_this_process({server.pid})  # registering twice is harmless
                print("registered", flush=True)
                time.sleep(120)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout.readline().strip() == "registered"
        watchdogs = psutil.Process(owner.pid).children()
        assert len(watchdogs) == 1  # one watchdog per process
        time.sleep(0.3)
        assert server.poll() is None  # nothing happens while the owner lives
        owner.send_signal(signal.SIGKILL)  # no atexit, no finally
        owner.wait(10)
        assert server.wait(30) == -signal.SIGTERM
        psutil.wait_procs(watchdogs, timeout=15)
        assert not watchdogs[0].is_running()  # the watchdog itself exits
        assert innocent.poll() is None  # not the Prefect server: left alone
    finally:
        for p in (server, innocent, owner):
            if p.poll() is None:
                p.kill()
                p.wait()
