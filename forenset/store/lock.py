"""One build per run directory, across processes and hosts: a lease with a heartbeat.

The lock is ``<run>/build.lock``, a small JSON document (holder host, pid, a random token, when
it started, its last heartbeat, the lease length). It is created only if absent:

* on a POSIX filesystem (local or shared, e.g. NFS) by ``open(O_CREAT | O_EXCL)``;
* on an object store by a conditional PUT — S3 ``If-None-Match: *`` (s3fs ``mode="create"``),
  GCS ``ifGenerationMatch=0`` (gcsfs ``mode="create"``); stores whose fsspec driver has no
  conditional create fall back to check-then-write, which only the lease protects.

While a build runs, a daemon thread rewrites the heartbeat every ``lease_s / 3`` seconds. A lock
is taken over when its holder is a dead process on this host, or when its heartbeat is older
than the lease (its host died or lost the network). Takeover on POSIX renames the stale lock
aside first (one renamer wins) and then creates anew; on object stores it deletes and creates
conditionally, then re-reads the lock to confirm the token, so two takers do not both proceed
(left open: two takers of one expired lock whose read-to-delete steps interleave within the
~50 ms confirmation wait; S3 has no conditional delete that s3fs exposes). Clocks of the hosts
must agree to well within the lease (NTP does); a heartbeat more than the lease in the future
(a clock ahead) counts as stale, and the refusal of one less far ahead says the clocks disagree.

Fencing: the lock's random token is its generation (a takeover writes a new one). Before every
commit (a shard, a manifest, ``state.json``, ``config.yaml``) the store re-reads the lock and
compares the token with the one it holds (``RunLock.check``); shard tasks in other processes
get the holder's token with their parameters. A holder that was paused past its lease (SIGSTOP,
a frozen VM) and lost the lock therefore stops at its next commit with ``LockLostError``, one
sentence. What is left: the read and the write are two steps, so a takeover that lands between
them (a pause of exactly that moment) lets one more commit through; object stores offer no
write conditioned on *another* object (S3's ``If-Match`` covers only the object written).
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import socket
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from forenset.errors import ForensetError

LOCK_NAME = "build.lock"


class RunLockedError(ForensetError, RuntimeError):
    """Another build holds the run directory."""


class LockLostError(ForensetError, RuntimeError):
    """This build's lease on the run directory expired and another build took it over: it must
    not commit anything more (fencing). The message is one sentence naming the new holder."""


def lost_message(uri: str, held: dict[str, Any] | None) -> str:
    """The one sentence of a build that lost its lock to ``held`` (None: the lock is gone)."""
    if held:
        who = f"process {held.get('pid')} on host {held.get('host')}"
        by = f"taken over by {who}"
    else:
        by = "removed"
    return (
        f"This build lost its lock on run directory {uri}: its lease expired (the process was "
        f"paused, or could not renew it in time) and the lock was {by}; it stopped before its "
        "next commit, so nothing of it mixes with the other build's files; run the same "
        "command again once that build is done to resume."
    )


def _now() -> float:
    return time.time()


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie counts as dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


class RunLock:
    """The lease of one build on one run directory (``RunStore.acquire_lock`` holds one)."""

    def __init__(self, fs: Any, path: str, uri: str, *, lease_s: float, posix: bool):
        self.fs = fs
        self.path = path
        self.uri = uri
        self.lease_s = float(lease_s)
        self.posix = posix
        self.token = uuid.uuid4().hex
        self.doc: dict[str, Any] = {}
        self.lost: str | None = None  # the sentence, once another build took the lock over
        self.took_over: str | None = None  # why the lock we replaced was stale, when we did
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- documents ---------------------------------------------------------------------------
    def _new_doc(self) -> dict[str, Any]:
        t = _now()
        return {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "token": self.token,
            "started": t,
            "heartbeat": t,
            "lease_s": self.lease_s,
        }

    def read(self) -> dict[str, Any] | None:
        """The lock's document, None when there is no lock ({} when it is unreadable)."""
        try:
            if self.posix:
                with open(self.path, "rb") as f:
                    raw = f.read()
            else:
                raw = self.fs.cat_file(self.path)
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(raw or b"{}")
        except ValueError:
            return {}
        return doc if isinstance(doc, dict) else {}

    def _create(self, doc: dict[str, Any]) -> bool:
        """Create the lock if absent; False when it exists."""
        data = json.dumps(doc, sort_keys=True).encode()
        if self.posix:
            # written whole under a private name, then hard-linked into place: the link fails
            # when the lock exists, and a reader never sees a created-but-empty lock (which it
            # would judge unreadable, hence stale, and take over while its holder runs)
            tmp = f"{self.path}.new-{self.token[:8]}"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                return False
            except FileNotFoundError:  # our file swept by the holder's cleanup: it exists
                return False
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            return True
        try:
            self.fs.pipe_file(self.path, data, mode="create")
        except FileExistsError:
            return False
        return True

    def _overwrite(self, doc: dict[str, Any]) -> None:
        data = json.dumps(doc, sort_keys=True).encode()
        if self.posix:
            tmp = f"{self.path}.hb-{self.token[:8]}"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path)
        else:
            self.fs.pipe_file(self.path, data)

    def _remove_stale(self, held: dict[str, Any]) -> bool:
        """Move the stale lock ``held`` out of the way; False when another taker was first."""
        if self.posix:
            aside = f"{self.path}.stale-{uuid.uuid4().hex[:8]}"
            try:
                os.rename(self.path, aside)
            except FileNotFoundError:
                return False
            os.unlink(aside)
            return True
        if (self.read() or {}).get("token") != held.get("token"):
            return False  # replaced since we judged it stale: by another taker
        try:
            self.fs.rm_file(self.path)
        except FileNotFoundError:
            pass
        return True

    # -- acquire / release ---------------------------------------------------------------------
    def stale_reason(self, held: dict[str, Any]) -> str | None:
        """Why ``held`` may be taken over, or None while its holder is alive."""
        if not held:
            return "unreadable"
        me = socket.gethostname()
        if held.get("host") == me and not pid_alive(int(held.get("pid") or 0)):
            return "dead process"
        if "heartbeat" not in held:  # a lock of an older version: only its pid can tell
            return None
        age = _now() - float(held["heartbeat"])
        lease = float(held.get("lease_s") or self.lease_s)
        if age > lease:
            return f"heartbeat {age:.0f} s old"
        if -age > lease:  # written "in the future": a clock ahead by more than the lease
            return (
                f"heartbeat {-age:.0f} s in the future: the clocks of host {held.get('host')} "
                f"and this host {me} disagree by more than the {lease:.0f} s lease"
            )
        return None

    def refusal(self, held: dict[str, Any]) -> str:
        who = f"process {held.get('pid')} on host {held.get('host')}"
        if "heartbeat" not in held:
            return (
                f"Run directory {self.uri} is being built by {who} (a lock without heartbeats); "
                f"wait for it, or remove {self.path} if it is gone."
            )
        hb = float(held["heartbeat"])
        lease = float(held.get("lease_s") or self.lease_s)
        if hb > _now() + 1:  # within the lease, but ahead of this host's clock
            return (
                f"Run directory {self.uri} is being built by {who} (last heartbeat {_stamp(hb)}, "
                f"{hb - _now():.0f} s in the future: the clocks of that host and this one "
                f"disagree); wait for it to finish, or fix the clocks (NTP): a heartbeat more "
                f"than the {lease:.0f} s lease in the future counts as stale."
            )
        return (
            f"Run directory {self.uri} is being built by {who} (last heartbeat {_stamp(hb)}, "
            f"{max(0.0, _now() - hb):.0f} s ago); wait for it to finish, or for its lease to "
            f"expire {lease:.0f} s after its last heartbeat, when the next build takes the run over."
        )

    def acquire(self) -> None:
        for _ in range(3):
            doc = self._new_doc()
            if self._create(doc):
                if not self.posix and not self._confirmed():
                    continue
                self.doc = doc
                self._start_heartbeat()
                return
            held = self.read()
            if held is None:
                continue  # released between our create and read
            reason = self.stale_reason(held)
            if reason is None:
                raise RunLockedError(self.refusal(held))
            if self._remove_stale(held):
                self.took_over = (
                    f"took over the lock of process {held.get('pid')} on host "
                    f"{held.get('host')} ({reason})"
                )
        held = self.read() or {}
        raise RunLockedError(self.refusal(held))

    def _confirmed(self) -> bool:
        """Object stores: the lock we created is still ours a moment later (guards the
        delete-then-create takeover of a stale lock against a second taker)."""
        time.sleep(0.05)
        held = self.read() or {}
        return held.get("token") == self.token

    def _start_heartbeat(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._beat, name="forenset-lock-heartbeat", daemon=True
        )
        self._thread.start()

    def _beat(self) -> None:
        every = max(1.0, self.lease_s / 3)
        while not self._stop.wait(every):
            try:
                self.heartbeat()
            except Exception:  # noqa: BLE001 - a missed beat is retried; the lease covers two
                continue

    def heartbeat(self) -> bool:
        """Renew the lease; False (and the beats stop) when the lock is no longer ours."""
        held = self.read()
        if (held or {}).get("token") != self.token:
            self._lose(held)
            return False
        self.doc = {**self.doc, "heartbeat": _now()}
        self._overwrite(self.doc)
        return True

    def _lose(self, held: dict[str, Any] | None) -> None:
        if self.lost is None:
            self.lost = lost_message(self.uri, held)
        self._stop.set()

    def check(self, token: str | None = None) -> None:
        """Fencing, before every commit: the lock is still ``token``'s (default: ours), else
        ``LockLostError``. Reads the lock (its token is its generation: a takeover writes a new
        one): one small read locally, one GET on an object store. A process that only runs
        shards for the holder passes the holder's token."""
        mine = token is None or token == self.token
        if mine and self.lost is not None:
            raise LockLostError(self.lost)
        held = self.read()
        if (held or {}).get("token") != (token or self.token):
            if mine:
                self._lose(held)
                raise LockLostError(self.lost or lost_message(self.uri, held))
            raise LockLostError(lost_message(self.uri, held))

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        held = self.read() or {}
        if held.get("token") == self.token:
            try:
                if self.posix:
                    os.unlink(self.path)
                else:
                    self.fs.rm_file(self.path)
            except FileNotFoundError:
                pass


def lock_path(root: str) -> str:
    return posixpath.join(root, LOCK_NAME)
