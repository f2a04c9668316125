"""Issue 40, the storage half: secrets in URLs refused, storage errors as one sentence, a lock
that fences a holder that lost it, clock skew bounded, every config bounded in cost."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from forenset.config import (
    CONFIG_MAX_BYTES,
    CONFIG_MAX_NODES,
    BuildConfig,
    ConfigError,
    load_config,
    validate_config,
)
from forenset.store import lock as lockmod
from forenset.store.lock import LockLostError, RunLock, RunLockedError
from forenset.store.run_store import RunStore
from forenset.store.storage import StorageConfig, StorageError, open_fs
from forenset.strict import YAMLTooLarge, load_yaml
from tests.conftest import small_config_dict

# CLI builds report to this worker's Prefect server (conftest.py: prefect_api)
pytestmark = pytest.mark.usefixtures("prefect_api")

KEY_ID = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"
USERINFO_URL = f"https://{KEY_ID}:{SECRET}@minio.internal:9000/"


def _cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "forenset.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def _one_sentence(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert "Traceback" not in stderr, stderr[-2000:]
    assert lines and lines[0].startswith("error:"), stderr[-2000:]
    return " ".join(ln.strip() for ln in lines)  # rich wraps one sentence over lines


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return port


# -- 1. userinfo in any URL of the config -------------------------------------------------------
@pytest.mark.parametrize(
    "over, key",
    [
        ({"storage": {"endpoint": USERINFO_URL}}, "storage.endpoint"),
        ({"run_dir": f"s3://{KEY_ID}:{SECRET}@bucket/run"}, "run_dir"),
        ({"captions": {"llm": {"base_url": USERINFO_URL}}}, "captions.llm.base_url"),
        ({"sources": {"csv": [f"https://user:{SECRET}@data.example/x.csv"]}}, "sources.csv[0]"),
        (
            {"generators": [{"name": "g", "family": "classical", "options": {"u": USERINFO_URL}}]},
            "generators[0].options.u",
        ),
    ],
)
def test_url_credentials_are_refused_in_one_sentence(tmp_path, over, key):
    data = {**small_config_dict(tmp_path / "run"), **over}
    with pytest.raises(ConfigError) as e:
        validate_config(data)
    msg = str(e.value)
    assert f"{key} holds a URL with a user name or password" in msg
    assert SECRET not in msg and KEY_ID not in msg and "***@" in msg
    assert msg.count("\n") == 0
    # the models refuse it too (a config built in Python, never through validate_config)
    if key in ("storage.endpoint", "run_dir", "sources.csv[0]"):
        with pytest.raises(ValueError, match="user name or password"):
            BuildConfig.model_validate(data)


def test_a_plain_url_and_an_at_sign_elsewhere_are_fine(tmp_path):
    cfg = validate_config(
        small_config_dict(
            tmp_path / "run",
            storage={"endpoint": "https://minio.internal:9000/"},
            generators=[
                {"name": "g", "family": "classical", "options": {"note": "mail me@example.org"}}
            ],
        )
    )
    assert cfg.storage.endpoint == "https://minio.internal:9000/"


def test_cli_build_with_url_credentials_stores_nothing(tmp_path):
    run = tmp_path / "run"
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        yaml.safe_dump({**small_config_dict(run), "storage": {"endpoint": USERINFO_URL}})
    )
    r = _cli("build", str(cfg))
    assert r.returncode == 2, r.stderr[-2000:]
    text = _one_sentence(r.stderr)
    assert "storage.endpoint holds a URL with a user name or password" in text
    assert SECRET not in r.stderr + r.stdout
    assert not run.exists()  # no config.yaml, no state, no lock
    # the same secret in the --run-dir of a build
    cfg.write_text(yaml.safe_dump(small_config_dict(run)))
    r = _cli("build", str(cfg), "--run-dir", f"s3://{KEY_ID}:{SECRET}@bucket/run")
    assert r.returncode == 1, r.stderr[-2000:]
    assert "URI holds a URL with a user name or password" in _one_sentence(r.stderr)
    assert SECRET not in r.stderr + r.stdout


def test_run_build_refuses_before_prefect_sees_a_parameter(tmp_path, monkeypatch):
    """The flow (whose parameters Prefect stores) is never called with a secret run URI."""
    from forenset.flows import build as fb

    called = []
    monkeypatch.setattr(fb, "build_flow", lambda *a, **k: called.append(a))
    cfg = validate_config(small_config_dict(tmp_path / "run"))
    with pytest.raises(StorageError, match="user name or password"):
        fb.run_build(f"s3://{KEY_ID}:{SECRET}@bucket/run", cfg)
    assert called == []


def test_url_credentials_in_forenset_storage_are_one_sentence(monkeypatch):
    monkeypatch.setenv("FORENSET_STORAGE", json.dumps({"endpoint": USERINFO_URL}))
    with pytest.raises(StorageError) as e:
        RunStore("s3://bucket/run")
    msg = str(e.value)
    assert msg.startswith("FORENSET_STORAGE is not valid storage settings: endpoint holds a URL")
    assert SECRET not in msg and "\n" not in msg


# -- 3. a gs:// run dir without gcsfs ---------------------------------------------------------
def test_gs_without_gcsfs_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gcsfs", None)  # as if not installed
    with pytest.raises(StorageError) as e:
        open_fs("gs://bucket/run")
    assert "pip install 'forenset[gcs]'" in str(e.value)


def test_cli_status_gs_without_gcsfs(tmp_path):
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gcsfs is installed here")
    r = _cli("status", "gs://bucket/run")
    assert r.returncode == 1
    assert "pip install 'forenset[gcs]'" in _one_sentence(r.stderr)


# -- 2. an endpoint that does not answer --------------------------------------------------------
def test_status_on_a_closed_endpoint_is_one_sentence():
    ep = f"http://127.0.0.1:{_closed_port()}"
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    for args, extra in (
        (["--endpoint-url", ep], {}),  # the flag
        ([], {"AWS_ENDPOINT_URL": ep}),  # the standard variable
    ):
        r = _cli("status", "s3://bucket/run", *args, env={**env, **extra})
        assert r.returncode == 1, r.stderr[-3000:]
        text = _one_sentence(r.stderr)
        assert f"Cannot reach the storage endpoint {ep}" in text
        assert "check that the server is up" in text


def test_build_on_a_closed_endpoint_is_one_sentence(tmp_path):
    ep = f"http://127.0.0.1:{_closed_port()}"
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        yaml.safe_dump({**small_config_dict("s3://bucket/run"), "storage": {"endpoint": ep}})
    )
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    r = _cli("build", str(cfg), env=env)
    assert r.returncode == 1, r.stderr[-3000:]
    assert f"Cannot reach the storage endpoint {ep} of s3://bucket/run" in _one_sentence(r.stderr)


# -- 4. fencing ---------------------------------------------------------------------------------
def _expire(store: RunStore, by_s: float = 60) -> None:
    """Age the lock's heartbeat past its lease, as a paused holder's would be."""
    path = store.path("build.lock")
    doc = json.loads(store.fs.cat_file(path))
    doc["heartbeat"] -= by_s
    store.fs.pipe_file(path, json.dumps(doc).encode())


def _takeover(store: RunStore) -> RunLock:
    """A second build (another RunLock on the same run) takes the expired lock over."""
    other = RunLock(store.fs, store.path("build.lock"), store.uri, lease_s=5, posix=store.is_local)
    other.acquire()
    other._stop.set()  # no heartbeat thread needed for the test
    assert other.took_over and "heartbeat" in other.took_over
    return other


def _fencing(store: RunStore) -> None:
    store.acquire_lock()
    try:
        store.write_json("state.json", {"status": "running"})  # ours: commits
        token = store.lock_token()
        _expire(store)
        other = _takeover(store)
        for commit in (
            lambda: store.write_json("state.json", {"status": "stale"}),
            lambda: store.write_manifest("sources", []),
        ):
            with pytest.raises(LockLostError) as e:
                commit()
            msg = str(e.value)
            assert "lost its lock" in msg and f"process {os.getpid()}" in msg
            assert "stopped before its next commit" in msg and "\n" not in msg
        # a shard task in another process carries the holder's token: fenced too
        worker_store = RunStore(store.uri, store.storage)
        import pyarrow as pa

        with pytest.raises(LockLostError):
            worker_store.write_shard("sources", "s0", pa.table({"a": [1]}), fingerprint="f",
                                     fence=token)  # fmt: skip
        assert not worker_store.exists("stages/sources/s0.parquet")
        assert (store.read_json("state.json") or {}).get("status") == "running"
        # the new holder commits; the old one's release leaves its lock alone
        other_store = RunStore(store.uri, store.storage)
        other_store.write_shard("sources", "s0", pa.table({"a": [1]}), fingerprint="f",
                                fence=other.token)  # fmt: skip
    finally:
        store.release_lock(all_levels=True)
    assert (json.loads(store.fs.cat_file(store.path("build.lock"))) or {})["token"] == other.token
    other.release()


def test_a_holder_that_lost_its_lock_stops_before_its_next_commit(tmp_path):
    _fencing(RunStore(str(tmp_path / "run"), StorageConfig(lock_lease_s=5)))


# -- 5. clock skew ------------------------------------------------------------------------------
def _foreign_lock(run: Path, heartbeat_in_s: float, lease_s: float) -> RunLock:
    run.mkdir(parents=True, exist_ok=True)
    now = time.time()
    doc = {"host": "other-host", "pid": 4242, "token": "t" * 32, "started": now,
           "heartbeat": now + heartbeat_in_s, "lease_s": lease_s}  # fmt: skip
    (run / "build.lock").write_text(json.dumps(doc))
    store = RunStore(str(run))
    return RunLock(store.fs, store.path("build.lock"), str(run), lease_s=lease_s, posix=True)


def test_a_heartbeat_far_in_the_future_is_stale_and_says_the_clocks_disagree(tmp_path):
    lock = _foreign_lock(tmp_path / "run", heartbeat_in_s=3600, lease_s=5)
    lock.acquire()
    try:
        assert lock.took_over and "clocks" in lock.took_over and "disagree" in lock.took_over
        assert json.loads((tmp_path / "run" / "build.lock").read_text())["token"] == lock.token
    finally:
        lock.release()


def test_a_heartbeat_slightly_in_the_future_is_refused_naming_the_clocks(tmp_path):
    lock = _foreign_lock(tmp_path / "run", heartbeat_in_s=60, lease_s=120)
    with pytest.raises(RunLockedError) as e:
        lock.acquire()
    assert "in the future" in str(e.value) and "clocks" in str(e.value)
    assert "0 s ago" not in str(e.value)


def test_a_heartbeat_within_the_lease_in_the_past_is_still_held(tmp_path, monkeypatch):
    lock = _foreign_lock(tmp_path / "run", heartbeat_in_s=-3, lease_s=120)
    with pytest.raises(RunLockedError, match="s ago"):
        lock.acquire()
    monkeypatch.setattr(lockmod, "_now", lambda: time.time() + 200)  # its lease ran out
    lock.acquire()
    lock.release()


# -- 6. bounded config cost ---------------------------------------------------------------------
BOMB = "\n".join(
    [
        "generators:",
        "- name: g",
        "  family: classical",
        "  options:",
        '    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"    {chr(98 + i)}: &{chr(98 + i)} [{','.join([f'*{chr(97 + i)}'] * 9)}]"
            for i in range(9)
        ),
    ]
)


def test_the_yaml_alias_bomb_is_refused_at_load(tmp_path):
    assert len(BOMB) < 700  # the 634-byte bomb, give or take
    p = tmp_path / "bomb.yaml"
    p.write_text(BOMB)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert "too large to load" in str(e.value) and "aliases" in str(e.value)


def test_aliases_count_as_copies_exactly():
    # a mapping, its key and value: 3; the list of two copies of it: 1 + 2 * 3 = 7
    doc = "x: &x {k: v}\ny: [*x, *x]\n"
    # root 1 + keys x, y 2 + {k: v} 3 + [*x, *x] 7 = 13
    assert load_yaml(doc, max_nodes=13) == {"x": {"k": "v"}, "y": [{"k": "v"}, {"k": "v"}]}
    with pytest.raises(YAMLTooLarge, match="more than 12 values"):
        load_yaml(doc, max_nodes=12)


def test_a_config_with_too_many_values_is_refused(tmp_path, monkeypatch):
    """Counted, not timed: the cap is lowered so the test stays tiny; the same code path
    refuses CONFIG_MAX_NODES at its real size."""
    from forenset import config as config_mod

    assert CONFIG_MAX_NODES == 100_000
    monkeypatch.setattr(config_mod, "CONFIG_MAX_NODES", 40)
    p = tmp_path / "cfg.yaml"
    # root mapping, 2 keys, 1 value, the list: 5 values, + n items
    p.write_text("seed: 0\nrun_dir: [" + ",".join(["x"] * 35) + "]\n")
    with pytest.raises(ConfigError, match="run_dir"):  # 40 values: loaded (then not a str)
        load_config(p)
    p.write_text("seed: 0\nrun_dir: [" + ",".join(["x"] * 36) + "]\n")
    with pytest.raises(ConfigError, match="more than 40 values"):
        load_config(p)
    p.write_text("seed: 0\nrun_dir: [" + ",".join(["x"] * 20_000) + "]\n")  # stops early
    with pytest.raises(ConfigError, match="holds more than 40 values"):
        load_config(p)


def test_config_byte_cap_and_nesting_are_bounded(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * CONFIG_MAX_BYTES + "\nseed: 0\n")
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(big)
    deep = tmp_path / "deep.yaml"
    deep.write_text("seed: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError, match="nests deeper"):
        load_config(deep)
    for doc in ("&a [*a]", "&a {k: *a}"):
        with pytest.raises(YAMLTooLarge, match="contains it"):
            load_yaml(doc)


# -- 4b. fencing with a real paused process -----------------------------------------------------
@pytest.mark.slow
def test_a_paused_build_that_lost_its_lock_stops_in_one_sentence(tmp_path):
    """`kill -STOP` a build mid-run with `lock_lease_s: 5`; a second build takes the run over;
    on `CONT` the first stops before its next commit, in one sentence, and the second's rows
    are the reference rows."""
    import signal

    from tests.helpers import all_rows
    from tests.reliability.clikit import committed, reference, start_build, tiny_config_dict

    ref, _ = reference()
    run = tmp_path / "run"
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        yaml.safe_dump({**tiny_config_dict(tmp_path / "unused"), "storage": {"lock_lease_s": 5}})
    )
    first = start_build(cfg, run)
    second = None
    try:
        deadline = time.monotonic() + 240
        while committed(run) < 1 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert first.poll() is None, "the first build ended before it could be paused"
        os.kill(first.pid, signal.SIGSTOP)
        time.sleep(7)  # > the 5 s lease since its last heartbeat
        second = start_build(cfg, run)
        lock = run / "build.lock"
        while time.monotonic() < deadline and second.poll() is None:
            try:
                if json.loads(lock.read_text()).get("pid") == second.pid:
                    break  # the second build holds the run now
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGCONT)
        _, err1 = first.communicate(timeout=240)
        out2, err2 = second.communicate(timeout=300)
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
    assert second.returncode == 0, err2[-3000:]
    assert first.returncode == 1, err1[-3000:]
    # the CLI's sentence (Prefect's own log lines of the failed flow run may precede it, as
    # for every stopped build), and no traceback
    assert "Traceback" not in err1
    text = " ".join(err1[err1.index("error: build stopped:") :].split())
    assert "This build lost its lock on run directory" in text, err1[-3000:]
    assert f"taken over by process {second.pid}" in text
    assert "it stopped before its next commit" in text
    assert all_rows(RunStore(str(run))) == ref
    assert not (run / "build.lock").exists()
