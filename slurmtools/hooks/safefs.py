"""File operations for hooks that run as root next to user-writable paths.

Why: slurmd runs the prolog/epilog as root; a user who can plant a symlink or win a rename race could otherwise
make root overwrite or delete any file. Every path is walked component by component with O_NOFOLLOW from `/`,
every write goes through a directory descriptor (`*at` calls) into a temporary created with O_EXCL, and the
spool folder must be owned by root (our euid) and not writable by group or others. Standard library only.
"""

from __future__ import annotations

import os
import stat

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(Exception):
    """A path a hook would write to or delete is not safe; the message names it and the reason."""


def open_secure_dir(path: str, create: bool = False, sticky_ok: bool = False) -> int:
    """Descriptor of directory `path`, refusing symlinks anywhere and any component others could tamper with.

    Ancestors may be world-writable only when sticky (like /tmp). With `create`, a missing LAST component is made
    with mode 0755; `sticky_ok` also accepts a sticky last folder (a scratch parent like /tmp, which we only
    delete from). The caller closes the descriptor.
    """
    if not path or not os.path.isabs(path):
        raise UnsafePath(f"{path!r}: not an absolute path")
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise UnsafePath(f"{path}: '.' or '..' in the path")
    me = os.geteuid()
    fd = os.open("/", _DIR_FLAGS)
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not (create and last):
                    raise UnsafePath(f"{path}: {name} does not exist") from None
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                except FileExistsError:  # another hook created it a moment ago (64 epilogs start together)
                    pass
                try:
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    raise UnsafePath(f"{path}: {name}: {e.strerror} (symlinks are refused)") from None
            except OSError as e:  # ELOOP/ENOTDIR: a symlink or a file where a directory belongs
                raise UnsafePath(f"{path}: {name}: {e.strerror} (symlinks are refused)") from None
            os.close(fd)
            fd = nfd
            st = os.fstat(fd)
            if st.st_uid not in (0, me):
                raise UnsafePath(f"{path}: {name} is owned by uid {st.st_uid}, not root")
            writable_by_others = st.st_mode & 0o022
            if writable_by_others and not (st.st_mode & stat.S_ISVTX and (sticky_ok or not last)):
                raise UnsafePath(f"{path}: {name} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})")
        return fd
    except BaseException:
        os.close(fd)
        raise


def write_atomic_at(dfd: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """Create or replace `name` in the directory `dfd` so that readers see the whole old or whole new file."""
    _check_name(name)
    tmp = f".{name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
    try:
        os.fchmod(fd, mode)   # exactly `mode`, whatever umask slurmd left the hook
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    os.fsync(dfd)


def append_at(dfd: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """One O_APPEND write: lines from concurrent hooks never interleave."""
    _check_name(name)
    fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
    try:
        st = os.fstat(fd)
        if st.st_size == 0 and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != mode:
            os.fchmod(fd, mode)   # a file this call created: exactly `mode`, whatever the umask
        os.write(fd, data)
    finally:
        os.close(fd)


def read_small_at(dfd: int, name: str, limit: int = 65536) -> bytes | None:
    """Contents of a regular file `name` (never through a symlink), or None if absent or not a plain file."""
    _check_name(name)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit)
    finally:
        os.close(fd)


def read_trusted(path: str, limit: int = 8 << 20) -> bytes:
    """Contents of a file root wrote for the hooks (a lab fault file, the node expectations): every folder above
    it as `open_secure_dir` wants, the file itself a plain file (never a symlink) owned by root (our euid) and not
    writable by group or others, so no job user can change what a root hook decides. Raises FileNotFoundError
    when it is absent, UnsafePath naming the reason otherwise."""
    folder, name = os.path.split(path)
    _check_name(name)
    dfd = open_secure_dir(folder or "/")
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise UnsafePath(f"{path}: {e.strerror} (symlinks are refused)") from None
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{path}: not a plain file")
        if st.st_uid not in (0, os.geteuid()):
            raise UnsafePath(f"{path}: owned by uid {st.st_uid}, not root")
        if st.st_mode & 0o022:
            raise UnsafePath(f"{path}: writable by group or others (mode {stat.S_IMODE(st.st_mode):o})")
        if st.st_size > limit:
            raise UnsafePath(f"{path}: larger than {limit} bytes")
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise UnsafePath(f"{path}: larger than {limit} bytes")
        return data
    finally:
        os.close(fd)


def remove_user_tree(parent: str, name: str, owner_uid: int | None) -> str:
    """Delete `parent/name` (a job's scratch folder) without following any symlink inside or at it.

    `parent` must be a safe directory (e.g. sticky /tmp). The entry must be owned by `owner_uid` (the job's user)
    or root; anything else is left alone. Returns what was done, for the log.
    """
    _check_name(name)
    pfd = open_secure_dir(parent, sticky_ok=True)
    try:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            return "absent"
        if st.st_uid not in (0, owner_uid):
            return f"left alone: owned by uid {st.st_uid}"
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=pfd)  # a symlink or file in its place: remove the entry, never its target
            return "removed non-directory entry"
        import shutil  # only here: importing it costs every job start a few milliseconds

        if not shutil.rmtree.avoids_symlink_attacks:
            return "left alone: this platform cannot delete safely"
        shutil.rmtree(name, dir_fd=pfd)
        return "removed"
    finally:
        os.close(pfd)


def _check_name(name: str) -> None:
    if not name or "/" in name or name in (".", "..") or "\0" in name:
        raise UnsafePath(f"{name!r}: not a plain file name")
