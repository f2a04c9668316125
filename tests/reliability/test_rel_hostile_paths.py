"""Hostile listings (issue 32, cases 2, 3, 7 and the empty source of 10): a downloaded
``metadata.csv`` or source folder that names files outside its folder, symlinks leading out, a
FIFO, a link to /dev/zero, a loopback URL, an empty source cell or an over-long cell. Each one
is an error row with the reason (or, for an unparseable listing, one sentence); nothing from
outside the folder reaches the blob store."""

from __future__ import annotations

import csv
import http.server
import os
import threading

import pytest

from forenset.config import validate_config
from forenset.scheduler import BuildFailed
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local
from tests.stages.test_external_candidates import edit_of, external_entry_point, photo

__all__ = ["external_entry_point"]  # the fixture, imported for its side effect


@pytest.fixture
def outside_photo_server(tmp_path):
    """A photo served on 127.0.0.1 (the 'internal URL' a hostile listing names)."""
    d = tmp_path / "served"
    d.mkdir()
    photo(9).save(d / "x.png")
    hits: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=str(d), **k)

        def log_message(self, *a):
            hits.append(self.path)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/x.png", hits
    srv.shutdown()
    srv.server_close()


def _unblock_fifo_later(path, after_s: float = 20.0) -> threading.Timer:
    """Old code blocks opening a FIFO for reading until a writer comes: open the writing end
    after a while, so a regression fails the test instead of hanging it."""

    def release():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass

    t = threading.Timer(after_s, release)
    t.daemon = True
    t.start()
    return t


@pytest.fixture
def hostile(tmp_path, outside_photo_server):
    url, _ = outside_photo_server
    outside = tmp_path / "outside"
    outside.mkdir()
    photo(7).save(outside / "secret.png")  # must never be read
    edit_of(photo(7)).save(outside / "secret_edit.png")
    d = tmp_path / "ext"
    (d / "src").mkdir(parents=True)
    (d / "out").mkdir()
    p1 = photo(1)
    p1.save(d / "src" / "p1.png")
    edit_of(p1).save(d / "out" / "e1.png")
    os.symlink(outside / "secret.png", d / "src" / "link_out.png")
    os.symlink(outside / "secret_edit.png", d / "out" / "link_out_edit.png")
    os.symlink("/dev/zero", d / "src" / "zero.png")
    os.mkfifo(d / "src" / "fifo.png")
    os.mkfifo(d / "out" / "fifo_edit.png")
    timers = [_unblock_fifo_later(d / "src" / "fifo.png"),
              _unblock_fifo_later(d / "out" / "fifo_edit.png")]  # fmt: skip
    rows_ = [
        ("src/p1.png", "Paint a blue square.", "out/e1.png"),  # the one good row
        ("../outside/secret.png", "Traversal.", "out/e1.png"),
        (str(outside / "secret.png"), "Absolute path.", "out/e1.png"),
        ("src/link_out.png", "Symlink out.", "out/e1.png"),
        ("src/zero.png", "Link to /dev/zero.", "out/e1.png"),
        ("src/fifo.png", "A FIFO.", "out/e1.png"),
        (url, "Loopback URL.", "out/e1.png"),
        ("", "Empty source.", "out/e1.png"),
        ("src/p1.png", "Edited outside.", "../outside/secret_edit.png"),
        ("src/p1.png", "Edited symlink out.", "out/link_out_edit.png"),
        ("src/p1.png", "Edited FIFO.", "out/fifo_edit.png"),
        ("src/p1.png", "Edited URL.", url),
    ]
    with open(d / "metadata.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["source", "instruction", "edited", "generator"])
        w.writerows((s, i, e, "imp") for s, i, e in rows_)
    yield d, outside
    for t in timers:
        t.cancel()


def config(tmp_path, path, sources=None, **opts):
    gens = [
        {"name": "cv-a", "family": "classical"},
        {"name": "imported", "backend": "external", "family": "external",
         "options": {"path": path, **opts}},
    ]  # fmt: skip
    return validate_config(
        small_config_dict(
            tmp_path / "run",
            sources={"samples": "none", "max_side": 48, **(sources or {})},
            generators=gens,
            evaluation={"enabled": False},
            fakebench={"enabled": False},
        )
    )


def _blob_bytes(store) -> set[bytes]:
    from pathlib import Path

    return {p.read_bytes() for p in (Path(store.root) / "blobs").rglob("*.png")}


@pytest.mark.timeout(240)
def test_hostile_external_listing_gives_error_rows(
    tmp_path, hostile, outside_photo_server, external_entry_point
):
    d, outside = hostile
    url, hits = outside_photo_server
    store, _, _ = run_local(config(tmp_path, str(d)))

    src = rows(store, "sources")
    ok = [r for r in src if r["status"] == "ok"]
    assert [r["name"] for r in ok] == ["p1.png"]
    errors = {r["uri"]: r["error"] for r in src if r["status"] == "error"}
    assert all(r["retryable"] is False for r in src if r["status"] == "error")

    def says(fragment_uri: str, *words: str) -> None:
        (uri,) = [u for u in errors if u.endswith(fragment_uri)]
        for w in words:
            assert w in errors[uri], (uri, errors[uri])

    says("outside/secret.png", "outside the listing's folder")  # traversal and absolute
    says("src/link_out.png", "outside the listing's folder", "resolves to")
    says("src/zero.png", "outside the listing's folder", "/dev/zero")
    says("src/fifo.png", "not a regular file", "FIFO")
    says(url, "remote reads are off")
    says("#row=7", "names no source photo")
    assert not hits, "the loopback URL was fetched"

    cands = [r for r in rows(store, "candidates") if r["generator"] == "imported"]
    assert sum(r["status"] == "ok" for r in cands) == 1
    cerr = sorted(r["error"] for r in cands if r["status"] == "error")
    assert len(cerr) == 4, cerr
    assert sum("outside the listing's folder" in e for e in cerr) == 2
    assert sum("not a regular file" in e for e in cerr) == 1
    assert sum("remote reads are off" in e for e in cerr) == 1

    # nothing from outside the folder was stored (the sources stage's normalised PNG of it)
    from forenset.images import encode_png, normalise

    secret = (outside / "secret.png").read_bytes()
    stored = encode_png(normalise(secret, max_side=48, max_pixels=40_000_000).image)
    assert stored not in _blob_bytes(store)


@pytest.mark.timeout(240)
def test_allowed_roots_and_remote_are_explicit(
    tmp_path, hostile, outside_photo_server, external_entry_point
):
    """With the outside folder listed in allowed_roots and loopback URLs allowed, those rows
    are read: the refusals come from the policy, not from the files."""
    d, outside = hostile
    url, hits = outside_photo_server
    cfg = config(
        tmp_path,
        str(d),
        sources={"allow_remote": True, "allow_private_hosts": True},
        allowed_roots=[str(outside)],
        allow_remote=True,
        allow_private_hosts=True,
    )
    store, _, _ = run_local(cfg)
    src = {r["name"]: r for r in rows(store, "sources")}
    assert src["secret.png"]["status"] == "ok"
    assert src["x.png"]["status"] == "ok" and hits
    assert src["fifo.png"]["status"] == "error"  # never a regular file
    assert src["zero.png"]["status"] == "error"


@pytest.mark.timeout(240)
def test_hostile_source_folder(tmp_path):
    """A folder source with a symlink out, a /dev/zero link and a FIFO: error rows, no hang."""
    outside = tmp_path / "outside"
    outside.mkdir()
    photo(7).save(outside / "secret.png")
    d = tmp_path / "photos"
    d.mkdir()
    photo(1).save(d / "good.png")
    os.symlink(outside / "secret.png", d / "link.png")
    os.symlink("/dev/zero", d / "zero.png")
    os.mkfifo(d / "fifo.png")
    t = _unblock_fifo_later(d / "fifo.png")
    try:
        cfg = validate_config(
            small_config_dict(
                tmp_path / "run",
                sources={"samples": "none", "max_side": 48, "folders": [str(d)]},
                evaluation={"enabled": False},
                fakebench={"enabled": False},
            )
        )
        store, _, _ = run_local(cfg)
    finally:
        t.cancel()
    src = {r["name"]: r for r in rows(store, "sources")}
    assert src["good.png"]["status"] == "ok"
    assert "outside the listing's folder" in src["link.png"]["error"]
    assert "outside the listing's folder" in src["zero.png"]["error"]
    assert "FIFO" in src["fifo.png"]["error"]


def test_over_long_csv_cell_is_one_sentence(tmp_path, external_entry_point):
    """A metadata.csv cell over 131,072 characters stops planning with one sentence."""
    d = tmp_path / "ext"
    d.mkdir()
    with open(d / "metadata.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["source", "instruction", "edited", "generator"])
        w.writerow(["a.png", "x" * 200_000, "b.png", "imp"])
    with pytest.raises(BuildFailed) as e:
        run_local(config(tmp_path, str(d)))
    msg = str(e.value)
    assert "line 2" in msg and "131072 characters" in msg and "\n" not in msg.strip()


def test_read_policy_units(tmp_path):
    """The policy on its own: private and link-local hosts stay refused with remote reads on,
    fsspec roots contain their own paths only, `..` cannot climb out of a remote root."""
    from forenset import paths

    remote = paths.ReadPolicy((), allow_remote=True)
    for url in ("http://169.254.169.254/latest/meta-data", "http://10.0.0.7/x.png",
                "http://localhost:8080/x.png", "https://[::1]/x.png", "http://0.0.0.0/x"):  # fmt: skip
        with pytest.raises(paths.InputRefused, match="non-public address"):
            paths.check(url, remote)
    with pytest.raises(paths.InputRefused, match="remote reads are off"):
        paths.check("https://example.org/x.png", paths.ReadPolicy(()))
    assert paths.check("http://127.0.0.1/x.png", paths.ReadPolicy((), True, True))
    mem = paths.ReadPolicy(("memory://bucket/photos",))
    assert paths.check("memory://bucket/photos/a.png", mem)
    for bad in ("memory://bucket/photos/../secret.png", "memory://bucket/photos2/a.png",
                "s3://bucket/photos/a.png"):  # fmt: skip
        with pytest.raises(paths.InputRefused, match="outside"):
            paths.check(bad, mem)
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(paths.InputRefused, match="larger than the 1024-byte cap"):
        paths.read_bytes(str(big), paths.ReadPolicy((str(tmp_path),), max_bytes=1024))
    assert len(paths.read_bytes(str(big), paths.ReadPolicy((str(tmp_path),)))) == 2048


def test_csv_coco_and_hf_sources_stay_inside_their_folder(tmp_path):
    """The sources stage's other listings under the same policy: a CSV, a COCO caption file
    and a saved dataset whose path cells climb out or are absolute give error rows."""
    import json

    datasets = pytest.importorskip("datasets")
    from tests.stages.test_source_kinds import png, source_rows

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.png").write_bytes(png(7))
    secret = str(outside / "secret.png")

    lst = tmp_path / "list"
    lst.mkdir()
    (lst / "ok.png").write_bytes(png(1))
    (lst / "photos.csv").write_text(f"path\nok.png\n../outside/secret.png\n{secret}\n\n")
    got = {r["uri"]: r for r in source_rows(tmp_path / "a", csv=[str(lst / "photos.csv")])}
    assert got[str(lst / "ok.png")]["status"] == "ok"
    bad = [r for r in got.values() if r["status"] == "error"]
    assert len(bad) == 1 and "outside the listing's folder" in bad[0]["error"]  # one file

    coco = tmp_path / "coco"
    coco.mkdir()
    (coco / "ok.png").write_bytes(png(2))
    doc = {"images": [{"id": 1, "file_name": "ok.png"}, {"id": 2, "file_name": secret},
                      {"id": 3, "file_name": "../outside/secret.png"}], "annotations": []}  # fmt: skip
    (coco / "captions.json").write_text(json.dumps(doc))
    got = source_rows(tmp_path / "b", datasets=[f"coco:{coco / 'captions.json'}"])
    # the two outside entries name one file: refused once, then a duplicate of that row
    assert sorted(r["status"] for r in got) == ["error", "error", "ok"]
    assert any("outside the listing's folder" in (r["error"] or "") for r in got)

    ds = datasets.Dataset.from_dict({"image": ["ok.png", "../outside/secret.png", secret]})
    ds.save_to_disk(str(tmp_path / "hfds"))
    (tmp_path / "hfds" / "ok.png").write_bytes(png(3))
    got = source_rows(tmp_path / "c", datasets=[f"hf:{tmp_path / 'hfds'}"])
    assert [r["status"] for r in got] == ["ok", "error", "error"]
    assert all("outside the listing's folder" in r["error"] for r in got[1:])
