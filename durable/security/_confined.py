"""Files of a data directory, opened without following a link: what durable writes stays inside it.

Whoever can write to a data directory can plant a symbolic link where
durable expects a folder or a file (``artifacts/`` pointing at your home
folder, a manifest pointing at ``~/.bashrc``). Every folder below the data
directory is therefore opened one component at a time, each relative to
the descriptor of the one before (``dir_fd``) with ``O_NOFOLLOW``, and every
file durable writes, reads or deletes there is named relative to its
folder's descriptor, never by a path. A link met on the way raises
``DataDirectoryError`` naming it: the check and the use are one system
call, so a link swapped in between has nothing to win.

The data directory itself is the caller's choice and may be a link. What
this cannot cover is said where it is used: SQLite opens its files by path
(``refuse_linked_files`` checks them just before), and a session's scratch
folder is handed to user code as a path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import DataDirectoryError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
_REFUSED = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)  # EMLINK: O_NOFOLLOW on a link (some BSDs)


def _refusal(root: Path, rel: Sequence[str], dir_fd: int | None = None) -> DataDirectoryError:
    """The error for ``root/rel``: a link (named with where it leads) or not a folder."""
    path = root.joinpath(*rel)
    try:
        st = os.lstat(rel[-1], dir_fd=dir_fd) if dir_fd is not None else os.lstat(path)
        link = stat.S_ISLNK(st.st_mode)
        target = os.readlink(rel[-1], dir_fd=dir_fd) if link and dir_fd is not None else None
    except OSError:
        link, target = True, None
    if link:
        said = f"is a symbolic link (to {target!r})" if target is not None else "is a symbolic link"
        advice = (
            "durable follows no link inside a data directory, so that nothing it writes or deletes "
            "lands outside it. Replace the link with a real folder or file (move its content in), or "
            "make the data directory itself the place you wanted"
        )
    else:
        said, advice = "is not a folder", "move it aside, and durable makes the folder again"
    return DataDirectoryError(
        f"{str(path)!r} in the data directory {str(root)!r} {said}. Nothing was written or deleted "
        f"there. {advice}.",
        path=str(path),
    )


def open_folder(root: Path, rel: Sequence[str], *, create: bool) -> int | None:
    """A descriptor of the folder ``root/rel...``, each component opened without following a link.

    Args:
        root: The data directory (opened as it is: it may be a link).
        rel: The folder's components below it (``("artifacts", "ab")``).
        create: Make the missing components; else a missing one gives ``None``.

    Raises:
        DataDirectoryError: A component is a link, or not a folder.
    """
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if create:
            raise
        return None
    try:
        for i, part in enumerate(rel):
            try:
                nxt = os.open(part, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    os.close(fd)
                    return None
                with contextlib.suppress(FileExistsError):  # another process made it meanwhile
                    os.mkdir(part, 0o777, dir_fd=fd)
                try:
                    nxt = os.open(part, _DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in _REFUSED:
                        raise _refusal(root, rel[: i + 1], fd) from None
                    raise
            except OSError as exc:
                if exc.errno in _REFUSED:
                    raise _refusal(root, rel[: i + 1], fd) from None
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def folder(root: Path, rel: Sequence[str], *, create: bool) -> Iterator[int | None]:
    """``open_folder`` for a block: the descriptor is closed after it."""
    fd = open_folder(root, rel, create=create)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def open_file(root: Path, rel: Sequence[str], name: str, flags: int, mode: int = 0o644) -> int:
    """A descriptor of the file ``name`` in the folder ``root/rel`` (made when missing), links refused.

    Raises:
        DataDirectoryError: The folder's path or the file is a link.
    """
    with folder(root, rel, create=True) as fd:
        assert fd is not None
        try:
            return os.open(name, flags | _NOFOLLOW, mode, dir_fd=fd)
        except OSError as exc:
            if exc.errno in _REFUSED:
                raise _refusal(root, [*rel, name], fd) from None
            raise


def read_file(root: Path, rel: Sequence[str], name: str) -> bytes | None:
    """The bytes of ``root/rel/name``, or ``None`` when it (or its folder) is missing; links refused.

    Raises:
        DataDirectoryError: The folder's path or the file is a link.
    """
    with folder(root, rel, create=False) as fd:
        if fd is None:
            return None
        try:
            f = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in _REFUSED:
                raise _refusal(root, [*rel, name], fd) from None
            raise
    with os.fdopen(f, "rb") as handle:
        return handle.read()


def _refuse_link(root: Path, rel: Sequence[str], name: str, fd: int) -> None:
    """Refuse a link at ``name`` in the folder ``fd`` (a missing ``name`` is fine)."""
    try:
        st = os.lstat(name, dir_fd=fd)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise _refusal(root, [*rel, name], fd)


def write_file(root: Path, rel: Sequence[str], name: str, data: bytes, *, fsync: bool = False) -> None:
    """Replace ``root/rel/name`` with ``data`` atomically (a new file renamed over the old one).

    A kill leaves the old content or the new one. The new file is made
    without following a link, and a link at ``name`` is refused rather than
    replaced. With ``fsync`` the file and its folder reach the disk first.

    Raises:
        DataDirectoryError: The folder's path or ``name`` is a link.
    """
    with folder(root, rel, create=True) as fd:
        assert fd is not None
        _refuse_link(root, rel, name, fd)
        tmp = f".tmp-{secrets.token_hex(8)}"
        f = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=fd)
        try:
            with os.fdopen(f, "wb") as handle:
                handle.write(data)
                if fsync:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise
        if fsync:
            os.fsync(fd)


def remove_file(root: Path, rel: Sequence[str], name: str) -> None:
    """Delete ``root/rel/name`` (a missing one is fine); a link there, or on the way, is refused.

    Raises:
        DataDirectoryError: The folder's path or ``name`` is a link.
    """
    with folder(root, rel, create=False) as fd:
        if fd is None:
            return
        _refuse_link(root, rel, name, fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=fd)


def list_folder(root: Path, rel: Sequence[str]) -> list[str]:
    """The names in ``root/rel`` (``[]`` when it is missing); a link on the way is refused."""
    with folder(root, rel, create=False) as fd:
        return [] if fd is None else sorted(os.listdir(fd))


def remove_folder(root: Path, rel: Sequence[str]) -> None:
    """Remove the folder ``root/rel`` when it is empty (anything else is left as it is)."""
    with folder(root, rel[:-1], create=False) as fd:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.rmdir(rel[-1], dir_fd=fd)


def refuse_links(root: Path, rel: Sequence[str], names: Sequence[str] = ()) -> None:
    """Refuse a link at the folder ``root/rel`` or on the way, or at one of ``names`` in it.

    For what durable cannot open itself without following links (SQLite
    opens its database and its journals by path): the check runs right
    before the open, which a link planted in between would still win.

    Raises:
        DataDirectoryError: A component, or one of ``names``, is a link.
    """
    with folder(root, rel, create=False) as fd:
        if fd is not None:
            for name in names:
                _refuse_link(root, rel, name, fd)


def refuse_linked_database(root: Path, rel: Sequence[str], name: str) -> None:
    """Refuse a SQLite file ``root/rel/name``, or one of its journals, that is a link, or a link on the way.

    Checked just before SQLite opens the file by its path.

    Raises:
        DataDirectoryError: The folder's path, the file or its ``-wal``, ``-shm`` or
            ``-journal`` is a link.
    """
    refuse_links(root, rel, [name, f"{name}-wal", f"{name}-shm", f"{name}-journal"])
