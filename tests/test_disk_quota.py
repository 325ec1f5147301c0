"""The worker's disk quota (eval/judge/disk_quota.py): sizes as users write them, what counts as held
(every inode once, sparse files by their blocks, open deleted files, folders the worker hid), and the
watch killing past the quota with its reason. The attacks themselves: tests/adversarial/disk_*."""
import os
import threading

import pytest

from eval.judge import disk_quota


@pytest.mark.parametrize("text,size", [("4G", 4 << 30), ("512M", 512 << 20), ("1048576", 1 << 20),
                                       ("1.5g", 3 << 29), ("64MiB", 64 << 20), ("10KB", 10 << 10)])
def test_sizes_as_written(text, size):
    assert disk_quota.parse_size(text) == size


@pytest.mark.parametrize("text", ["x", "", "-1G", "0"])
def test_bad_size_is_one_line_naming_the_variable(text):
    with pytest.raises(disk_quota.QuotaError, match="EVAL_WORKER_DISK"):
        disk_quota.parse_size(text)


def test_the_quota_never_takes_more_than_a_quarter_of_the_free_space(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_WORKER_DISK", "1T")
    fs = os.statvfs(tmp_path)
    assert disk_quota.quota_for(str(tmp_path)) <= max(disk_quota.MIN_QUOTA, fs.f_bavail * fs.f_frsize // 4)
    monkeypatch.setenv("EVAL_WORKER_DISK", "1M")
    assert disk_quota.quota_for(str(tmp_path)) == 1 << 20  # asked for less: less


def test_held_counts_blocks_once_and_open_deleted_files(tmp_path):
    data = os.urandom(1 << 20)
    (tmp_path / "a").write_bytes(data)
    os.link(tmp_path / "a", tmp_path / "a-again")  # the same inode: counted once
    with open(tmp_path / "sparse", "wb") as handle:  # 1 GiB long, nearly nothing allocated
        handle.truncate(1 << 30)
    hidden = tmp_path / "deep" / "er"
    hidden.mkdir(parents=True)
    (hidden / "b").write_bytes(data)
    os.chmod(tmp_path / "deep", 0)  # a folder the worker hid from its judge
    ghost = open(tmp_path / "ghost", "wb")
    ghost.write(data)
    ghost.flush()
    os.unlink(tmp_path / "ghost")
    try:
        used, names = disk_quota.held([str(tmp_path)], [os.getpid()])
    finally:
        ghost.close()
    assert 3 << 20 <= used < 4 << 20, used
    assert names == 6  # a, a-again, sparse, deep, er, b


def test_the_watch_kills_past_the_quota_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(disk_quota, "INTERVAL_S", 0.01)
    killed = threading.Event()
    watch = disk_quota.DiskWatch([str(tmp_path)], lambda: [], killed.set, quota=1 << 20)
    try:
        assert not killed.wait(0.1) and watch.reason is None  # within the quota: left alone
        (tmp_path / "big").write_bytes(os.urandom(2 << 20))
        assert killed.wait(5)
        assert watch.reason.startswith("disk quota: the worker held 2 MiB of files") and "EVAL_WORKER_DISK" in watch.reason
    finally:
        watch.stop()


def test_the_build_cache_keeps_its_size_by_evicting_the_least_recently_used(tmp_path, monkeypatch):
    """Thousands of candidates each store builds of their own: the cache, not one worker, would fill
    the disk. Past EVAL_BUILD_CACHE the entries used least recently go; the one just stored stays,
    and an entry a worker was seeded from counts as used."""
    import time

    from eval.judge import build_cache

    monkeypatch.setenv("EVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EVAL_BUILD_CACHE", "3M")

    def build(name):
        folder = tmp_path / "worker" / name
        folder.mkdir(parents=True)
        (folder / "lib.so").write_bytes(os.urandom(1 << 20))
        assert build_cache.store(name, folder)
        time.sleep(0.01)

    for name in ("a", "b", "c"):
        build(name)
    assert build_cache.seed("a", tmp_path / "seeded")  # a used again: b is now the oldest
    build("d")
    kept = sorted(p.name for p in build_cache.root().iterdir() if not p.name.startswith("."))
    assert kept == ["a", "c", "d"], kept
    monkeypatch.setenv("EVAL_BUILD_CACHE", "1M")
    assert build_cache.prune(keep="d") == ["c", "a"]
    monkeypatch.setenv("EVAL_BUILD_CACHE", "lots")
    with pytest.raises(disk_quota.QuotaError, match="EVAL_BUILD_CACHE"):
        build_cache.prune()


def test_names_past_path_max_and_mapped_deleted_files_are_counted(tmp_path):
    """Red team round 7: a chain of long folder names puts files past PATH_MAX, where a walk by
    paths cannot stat them; a file mapped, closed and deleted has no name and no descriptor."""
    import ctypes
    import mmap

    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(20):  # 20 x 250 characters: past 4096
        os.mkdir("d" * 250, dir_fd=fd)
        child = os.open("d" * 250, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    out = os.open("deep", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
    os.write(out, os.urandom(1 << 20))
    os.close(out)
    os.close(fd)
    used, _ = disk_quota.held([str(tmp_path)], [])
    assert used >= 1 << 20, used
    path = tmp_path / "mapped"
    with open(path, "wb") as handle:
        handle.truncate(2 << 20)
    with open(path, "r+b") as handle:
        view = mmap.mmap(handle.fileno(), 2 << 20)
    os.unlink(path)
    view.write(b"\x01" * (2 << 20))
    libc = ctypes.CDLL(None)  # Python's mmap keeps a descriptor; the mapping alone must count too
    try:
        before, _ = disk_quota.held([str(tmp_path)], [os.getpid()])
        assert before >= (3 << 20) - 4096, before
    finally:
        view.close()
        del libc
