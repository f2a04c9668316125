"""tune_allocator: freed image buffers are reused from the heap instead of re-faulted."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import resource, sys, numpy as np
if sys.argv[1] == "tuned":
    from forenset.runtime import tune_allocator
    assert tune_allocator() and tune_allocator()  # idempotent
a = np.ones((512, 512, 3), np.float32)
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(30):
    b = a * 2.0
    c = b + 1.0
    del b, c
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


def _faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc-only")
def test_tuned_allocator_reuses_freed_buffers() -> None:
    system, tuned = _faults("system"), _faults("tuned")
    # 60 buffers of 3 MiB: ~46k page faults when each is a fresh mmap, a few hundred when reused
    assert tuned * 10 < system, (system, tuned)


def test_execute_shard_tunes_when_configured(tmp_path, monkeypatch) -> None:
    from forenset import worker as runner
    from forenset.config import validate_config

    calls: list[int] = []
    monkeypatch.setattr(runner, "tune_allocator", lambda: calls.append(1) or True)
    for flag, expected in ((False, 0), (True, 1)):
        calls.clear()
        cfg = validate_config({"run_dir": str(tmp_path / str(flag)), "tune_allocator": flag})

        class Boom(Exception):
            pass

        class Stage:
            ctx = runner.StageContext(runner.RunStore(cfg.run_dir), cfg)

            def read_inputs(self, spec):
                raise Boom

        with pytest.raises(Boom):
            runner.execute_shard(Stage(), None)  # type: ignore[arg-type]
        assert len(calls) == expected
