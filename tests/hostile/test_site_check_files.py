"""Site files that cannot be read as TOML text: each is one line naming the file, exit 2, never a traceback."""

from __future__ import annotations

import os

import pytest

from slurmtools.errors import ConfigError
from slurmtools.site import load_site
from tests.hostile.site_check_support import BASE, edited, refusal


def test_invalid_utf8_names_the_byte(tmp_path):
    p = tmp_path / "site.toml"
    p.write_bytes(b'[site]\nname = "\xff"\n')
    assert refusal("site", "check", str(p)) == f"{p}: not UTF-8 text (byte 0xff at offset 15)"


def test_unreadable_file(tmp_path):
    p = edited(tmp_path, "[site]", "[site]")
    p.chmod(0)
    if os.geteuid() == 0:  # root reads any file: read it as nobody, which the kernel refuses the same way
        os.seteuid(65534)
        try:
            with pytest.raises(ConfigError) as err:
                load_site(p)
        finally:
            os.seteuid(0)
        assert str(err.value) == f"{p}: cannot read: Permission denied"
    else:
        assert refusal("site", "check", str(p)) == f"{p}: cannot read: Permission denied"


def test_symlink_loop(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.symlink_to(b)
    b.symlink_to(a)
    assert refusal("site", "check", str(a)) == f"{a}: cannot read: Too many levels of symbolic links"


def test_a_path_through_a_file(tmp_path):
    p = edited(tmp_path, "[site]", "[site]")
    bad = p / "site.toml"
    assert refusal("site", "check", str(bad)) == f"{bad}: cannot read: Not a directory"


@pytest.mark.parametrize("nest", ["x = " + "[" * 3000 + "]" * 3000, "x = " + "{a = " * 3000 + "1" + "}" * 3000])
def test_deep_nesting(tmp_path, nest):
    p = tmp_path / "site.toml"
    p.write_text(BASE + "\n" + nest + "\n")
    assert refusal("site", "check", str(p)) == f"{p}: nested too deeply (TOML arrays or inline tables)"


def test_a_fifo_is_not_read(tmp_path):
    """A FIFO would block the command forever (and /dev/zero would fill memory): only regular files are read."""
    p = tmp_path / "site.toml"
    os.mkfifo(p)
    assert refusal("site", "check", str(p)) == f"{p}: not a regular file"
    assert refusal("site", "check", "/dev/zero") == "/dev/zero: not a regular file"


def test_a_broken_fabric_file_is_named(tmp_path):
    fab = tmp_path / "fabric.toml"
    fab.write_bytes(b"[fabric]\nname = \"\xfe\"\n")
    p = edited(tmp_path, 'fabric = "', f'fabric = "{fab}"  # was "')
    assert refusal("site", "check", str(p)) == f"{fab}: not UTF-8 text (byte 0xfe at offset 17)"
    assert refusal("admin", "render", "qos", "--site", str(p)) == f"{fab}: not UTF-8 text (byte 0xfe at offset 17)"
