"""The object-store scratch folder cannot be planted by another local user (issue 33, class 3).

Real folders, links and ownership under a private temporary directory standing in for
``$TMPDIR``: a folder planted at the predictable name (a link to the victim's folder, a folder
open to everyone, a folder of another user) is refused, and what it points at is untouched.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from tracewh.core.errors import WarehouseError
from tracewh.storage.store import Store

URL = "s3://bucket/warehouse"


@pytest.fixture
def tmpdir_(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _base(tmp: Path) -> Path:
    return tmp / f"tracewh-{os.getuid()}"


def test_the_scratch_folder_is_private(tmpdir_: Path) -> None:
    store = Store(URL)
    folder = store.local_dir
    assert folder.parent == _base(tmpdir_)
    for p in (folder, folder.parent):
        st = os.lstat(p)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        assert st.st_uid == os.getuid()
    assert Store(URL).local_dir == folder  # the user's processes share it (locks)
    assert Store(URL + "2").local_dir != folder


def test_a_planted_link_is_refused_and_its_target_untouched(tmpdir_: Path) -> None:
    victim = tmpdir_ / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep")
    _base(tmpdir_).symlink_to(victim)
    with pytest.raises(WarehouseError, match="is a symbolic link"):
        _ = Store(URL).local_dir
    with pytest.raises(WarehouseError):
        _ = Store(URL).locks_dir
    assert [p.name for p in victim.iterdir()] == ["precious.txt"]
    assert (victim / "precious.txt").read_text() == "keep"


def test_a_planted_inner_link_is_refused(tmpdir_: Path) -> None:
    victim = tmpdir_ / "victim"
    victim.mkdir()
    (victim / "_locks").mkdir()
    (victim / "_locks" / "writers.lock").write_text("victim's file")
    base = _base(tmpdir_)
    base.mkdir(mode=0o700)
    digest_dir = Store(URL).local_dir  # made once, then replaced by a link (as if planted)
    digest_dir.rmdir()
    digest_dir.symlink_to(victim)
    with pytest.raises(WarehouseError, match="symbolic link"):
        _ = Store(URL).local_dir
    assert (victim / "_locks" / "writers.lock").read_text() == "victim's file"


def test_a_folder_open_to_others_is_refused(tmpdir_: Path) -> None:
    base = _base(tmpdir_)
    base.mkdir()
    base.chmod(0o777)
    with pytest.raises(WarehouseError, match="open to other users"):
        _ = Store(URL).local_dir
    assert list(base.iterdir()) == []


def test_a_folder_of_another_user_is_refused(tmpdir_: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("making a folder of another user needs root")
    base = _base(tmpdir_)
    base.mkdir(mode=0o700)
    os.chown(base, 65534, 65534)
    with pytest.raises(WarehouseError, match="belongs to another user"):
        _ = Store(URL).local_dir
