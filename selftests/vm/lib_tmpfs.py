#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The guest's writable /lib: lib_tmpfs.py DIR

Run by the guest's init (selftests/vm/init) chrooted into the host's root, which is
read-only over 9p and may have no DIR/modules to mount on. Mounts a tmpfs over DIR (the
host's /usr/lib), binds each of DIR's entries back in (symbolic links copied, modules
left out) and creates an empty DIR/modules for init to fill. One process does it all:
a busybox mount per entry makes the debug guest's boot slow.
"""
import ctypes
import os
import sys

MS_BIND = 4096
libc = ctypes.CDLL(None, use_errno=True)


def mount(source, target, fstype, flags, data):
    """mount(2); exits with a message on failure."""
    def arg(s):
        return s.encode() if s is not None else None
    if libc.mount(arg(source), arg(target), arg(fstype), flags, arg(data)) != 0:
        err = ctypes.get_errno()
        sys.exit(f"lib_tmpfs.py: mount {source} on {target}: {os.strerror(err)}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: lib_tmpfs.py DIR")
    lib = sys.argv[1]
    entries = sorted(os.listdir(lib))
    # The host's DIR stays reachable through this descriptor once the tmpfs hides it.
    below = os.open(lib, os.O_PATH | os.O_DIRECTORY)
    mount("lib", lib, "tmpfs", 0, "mode=0755")
    for name in entries:
        if name == "modules":
            continue
        source = f"/proc/self/fd/{below}/{name}"
        target = os.path.join(lib, name)
        if os.path.islink(source):
            os.symlink(os.readlink(source), target)
            continue
        if os.path.isdir(source):
            os.mkdir(target)
        else:
            open(target, "w").close()
        mount(source, target, None, MS_BIND, None)
    os.mkdir(os.path.join(lib, "modules"))


if __name__ == "__main__":
    main()
