"""The local scratch folder of an object-store warehouse: private to the user, never a link.

Staging files and the locks that keep two processes of one machine from doing the same
work live on local disk beside an ``s3://...`` warehouse. They were in
``$TMPDIR/tracewh-<sha1(url)>``: a name any local user can compute and create first, then
fill with links (a lock file linked to the victim's file was truncated; a staging folder
linked to the victim's folder was deleted). The folder must be shared by the user's
processes (the locks only work if they all find it), so it cannot be a random ``mkdtemp``
name; instead it is ``$TMPDIR/tracewh-<uid>/<sha1(url)>``, and both levels are created with
mode 0700 and checked before use: a real folder (not a link), owned by this user, with no
access for anyone else. Another user cannot create anything inside a folder like that, so
no link can be planted below it. A folder that fails the check is refused with
:class:`~tracewh.core.errors.WarehouseError`, never repaired or removed.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

from tracewh.core.errors import WarehouseError


def private_dir(path: Path, *, about: str) -> Path:
    """Create ``path`` (mode 0700) if missing, then check it is a private folder of this user.

    Raises
    ------
    WarehouseError
        ``path`` is a link, not a folder, owned by another user, or open to others.
    """
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise WarehouseError(about, f"cannot create the local scratch folder {path}: "
                                    f"{exc.strerror or exc}") from exc
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise WarehouseError(about, f"cannot inspect the scratch folder {path}: {exc.strerror or exc}") from exc
    problem = None
    if stat.S_ISLNK(st.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "is not a folder"
    elif hasattr(os, "getuid") and st.st_uid != os.getuid():
        problem = f"belongs to another user (uid {st.st_uid})"
    elif st.st_mode & 0o077:
        problem = f"is open to other users (mode {stat.S_IMODE(st.st_mode):o})"
    if problem is not None:
        raise WarehouseError(
            about, f"the local scratch folder {path} {problem}: refused (another user may have "
            "planted it); remove it, or give a private folder as scratch")
    return path


def scratch_dir(url: str) -> Path:
    """The private local folder of the object-store warehouse ``url`` (see the module docstring)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    base = private_dir(Path(tempfile.gettempdir()) / f"tracewh-{uid}", about=url)
    digest = hashlib.sha1(url.encode()).hexdigest()[:16]
    return private_dir(base / digest, about=url)
