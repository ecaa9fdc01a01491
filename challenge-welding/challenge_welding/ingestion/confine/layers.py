"""The layers beneath Landlock and seccomp: no capabilities, namespaces, a read-only world.

Applied in the confined process's ``preexec_fn`` (sandbox.Confinement), before Landlock
and seccomp, in this order:

1. **user namespace** (only where the evaluator is not root and the kernel lends one: a
   participant's laptop): the same uid mapped to itself, ``setgroups`` denied; it gives the
   process the right to make the namespaces below and to empty its bounding set;
2. **namespaces** (``unshare``): mount (always, when any is lent), IPC, network (loopback
   only, brought up; not at install time when the install may download), pid;
3. **mount namespace**: every mount made private; the users' and temporary folders
   (``/root``, ``/home``, ``/tmp``, ``/var/tmp``, ``/run``, ``/dev/shm``) replaced by empty
   tmpfs, with only the folders the process must read or write bound back at their own
   paths; the whole tree read-only (``mount_setattr``, recursive) but for those it writes;
   the run's holes (input data, reference data, the output folder, the evaluator's
   site-packages) covered by an empty, unreadable, read-only tmpfs; the participant's scratch
   folder (``Plan.tmpfs``) a tmpfs of its own, of a bounded size, so that what it writes can
   never fill the evaluator's file system (it meets ENOSPC in its own folder). Files are then confined
   without Landlock, even for a process that stays uid 0 (root without CAP_DAC_OVERRIDE
   still owns root's files: only a read-only mount stops it writing them);
4. **pid namespace**: ``CLONE_NEWPID`` applies to the caller's children, so the preexec
   forks: the process the ingestion started (``Popen.pid``, the group leader the reaper
   kills) stays outside and only waits, then ends the way its child ended; its child is
   pid 1 of the new namespace: it mounts a fresh ``/proc`` (no other process is seen: none
   of ours can be signalled, traced, re-prioritised or have its /proc read: a pid of ours
   is not even a name there), forks the child that goes on to exec (pid 2, so that its own
   signals work as anywhere) and reaps orphans. Each dies if its parent dies (PDEATHSIG),
   and the kernel kills every process of the namespace when pid 1 ends;
5. **capabilities**: every capability up to the kernel's ``cap_last_cap`` dropped from the
   bounding set, the ambient set cleared, then effective, permitted and inheritable emptied
   (``capset``), as root or not: ``sethostname``, ``adjtimex``, ``reboot``, ``mknod``,
   mounts, raw sockets... all EPERM, and no exec can give any back (no_new_privs follows);
6. **a user of its own** (:func:`sandbox_user`; every install step of participant code and
   the child, where root may change user): between emptying the bounding set and
   ``capset``, no group, gid 64290 and a uid leased for the run from 64290..65289
   (:func:`lease_uid`: two runs at once are two users), so that the kernel's same-user
   checks (signals, SIGIO, scheduling, ptrace, /proc, root's socket files, another run's)
   refuse by themselves. Without a mount namespace only where the kernel's permission checks
   give it what it must read and nothing of ours (:func:`user_confines`, an ACL entry denying
   the group 64290 the run's data folders, which no run's end takes from another).

Why direct syscalls rather than bubblewrap: the layers must come before our Landlock ruleset
and seccomp filter and after the process group is made, in the one preexec the ingestion and
its reaper already drive (the child's pid, its group, the socket it inherits); bwrap would
be a second exec between them, with its own seccomp hand-over by descriptor and a setuid
helper or user namespaces the Codabench worker does not lend, and it is one more package in
the evaluator image. The syscalls are unshare, mount, mount_setattr, capset and prctl: each
a line. Where the kernel (or the container) lends no namespace, :func:`probe` says so and
the layers above (Landlock, seccomp) hold alone; ``ingest`` says which layers hold.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

try:  # Linux-only modules: this module is imported (not used) where they are missing
    import fcntl
    import resource
except ImportError:
    fcntl = resource = None

_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MOUNT_ATTR_RDONLY, AT_RECURSIVE = 0x1, 0x8000
SYS_MOUNT_SETATTR = 442  # the same on x86_64 and aarch64 (the generic table)
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}.get(platform.machine())
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 1, 24, 47, 4
PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE = 38, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1

# Folders of users and temporary files: replaced by an empty tmpfs (what the process needs
# inside them is bound back). A socket of the organiser's (Docker's, Podman's) lives there.
MASKED = ("/root", "/home", "/tmp", "/var/tmp", "/run", "/dev/shm")


def last_cap() -> int:
    """The kernel's highest capability number (40 on 6.x; 37 on 5.4)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 63


@dataclass
class Plan:
    """Which layers to make; built in the parent, applied in the preexec (:meth:`enter`)."""

    userns: bool = False          # a user namespace first (not root)
    mount: bool = False
    ipc: bool = False
    net: bool = False             # a network namespace (loopback only)
    pid: bool = False
    read: list = field(default_factory=list)    # bound back read-only under MASKED
    write: list = field(default_factory=list)   # bound back writable, kept writable
    holes: list = field(default_factory=list)   # covered by an empty unreadable tmpfs
    # write folders made a tmpfs of their own: {path: size in bytes}; ``tmpfs_owner`` (uid,
    # gid) owns it (the sandbox user), else the evaluator's user; ``tmpfs_dirs``: folders made
    # in it (the scratch's tmp/)
    tmpfs: dict = field(default_factory=dict)
    tmpfs_owner: tuple | None = None
    tmpfs_dirs: tuple = ()
    uid: int = 0
    gid: int = 0
    # (uid, gid) mapped in the user namespace beside our own, so that the child can become
    # that user there (root holding CAP_SETUID and CAP_SETGID without CAP_SYS_ADMIN: `podman
    # run` as root); None: our own ids alone (a user's laptop: no other uid may be mapped)
    map_user: tuple | None = None

    def flags(self) -> int:
        return ((CLONE_NEWUSER if self.userns else 0) | (CLONE_NEWNS if self.mount else 0)
                | (CLONE_NEWIPC if self.ipc else 0) | (CLONE_NEWNET if self.net else 0)
                | (CLONE_NEWPID if self.pid else 0))

    def names(self) -> list[str]:
        return [n for n, on in (("user", self.userns), ("mount", self.mount), ("ipc", self.ipc),
                                ("net", self.net), ("pid", self.pid)) if on]

    def prepare(self) -> None:
        """Resolve the paths (in the parent: no path walk after fork)."""
        real = os.path.realpath
        # name resolution (an install that downloads): resolv.conf often links into /run
        self.read = [*self.read, *(f for f in ("/etc/resolv.conf", "/etc/hosts")
                                   if os.path.exists(f))]
        self.write = sorted({real(p) for p in self.write if p and os.path.exists(p)})
        self.tmpfs = {real(p): int(n) for p, n in self.tmpfs.items() if real(p) in self.write}
        self.read = sorted({real(p) for p in self.read if p and os.path.exists(p)} - set(self.write))
        keep = self.read + self.write
        # a hole that holds something the process must reach stays (Landlock carves it)
        self.holes = sorted({real(h) for h in self.holes if h and os.path.isdir(h)
                             and not any(_under(k, real(h)) for k in keep)})
        self.uid, self.gid = os.getuid(), os.getgid()

    # -- after fork -------------------------------------------------------------------------
    def enter(self) -> None:
        """In the forked process, before exec: make the namespaces and the mounts; with a pid
        namespace, fork: this process waits (never returns) and its child returns."""
        if self.userns and self.map_user is not None:
            self._userns_with(*self.map_user)
        elif self.userns:
            _check(_libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
            # the ingestion is non-dumpable (reaper.guarded), and so this fork of it: its
            # /proc/self files are root's until it is dumpable again (exec would do it)
            _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{self.uid} {self.uid} 1")
            _write("/proc/self/gid_map", f"{self.gid} {self.gid} 1")
            _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        rest = self.flags() & ~CLONE_NEWUSER
        if rest:
            _check(_libc.unshare(rest), "unshare")
        if self.mount:
            self._mounts()
        if self.net:
            _loopback_up()
        if self.pid:
            self._fork_into_pid_ns()  # pid 2 of the new namespace from here

    def _userns_with(self, uid: int, gid: int) -> None:
        """A user namespace mapping our ids and ``uid``/``gid`` (each to itself), so that the
        child becomes that user inside and is that user outside too: every same-user check of
        the kernel then refuses it our processes. A process cannot write a map of more than
        its own id into its own new namespace (the kernel wants CAP_SETUID in the parent
        namespace, which it left), so a helper forked before the unshare, still outside with
        our capabilities, writes both maps, as newuidmap(1) does for a user's login."""
        r, w = os.pipe()
        r2, w2 = os.pipe()
        helper = os.fork()
        if helper == 0:  # outside, root with CAP_SETUID and CAP_SETGID
            os.close(w)
            os.close(r2)
            said = b"the namespace was not made"
            try:
                if os.read(r, 1) == b"u":
                    target = os.getppid()
                    _write(f"/proc/{target}/uid_map", f"{self.uid} {self.uid} 1\n{uid} {uid} 1")
                    _write(f"/proc/{target}/gid_map", f"{self.gid} {self.gid} 1\n{gid} {gid} 1")
                    said = b"ok"
            except OSError as exc:
                said = (exc.strerror or str(exc)).encode()
            os.write(w2, said)
            os._exit(0)
        os.close(r)
        os.close(w2)
        made = _libc.unshare(CLONE_NEWUSER) == 0
        os.write(w, b"u" if made else b"x")  # the helper must not map a namespace not made
        if not made:
            _fail("unshare(CLONE_NEWUSER)")
        told = os.read(r2, 200)
        os.waitpid(helper, 0)
        os.close(w)
        os.close(r2)
        if told != b"ok":
            os.write(2, f"challenge-welding sandbox: mapping uid {uid} in the user namespace "
                        f"failed ({told.decode(errors='replace')})\n".encode())
            os._exit(125)

    def _mounts(self) -> None:
        libc = _libc
        _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
        # descriptors of what is bound back, opened before the tmpfs hide them
        back = []
        for path in sorted(self.read + self.write):  # a folder before what it holds
            if any(_under(path, m) for m in MASKED):
                try:
                    back.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC), path in self.write))
                except OSError:
                    continue  # out of this user's reach anyway: nothing to bind back
        for mask in MASKED:
            if os.path.isdir(mask) and not os.path.islink(mask):
                _check(libc.mount(b"tmpfs", mask.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                                  b"mode=0755,size=1m" if mask != "/dev/shm" else b"mode=1777"),
                       f"mount tmpfs on {mask}")
        for path, fd, _w in back:
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            _check(libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None,
                              MS_BIND | MS_REC, None), f"bind {path}")
            os.close(fd)
        # the whole tree read-only, then what it writes writable again
        attr = ctypes.create_string_buffer(struct.pack("=QQQQ", MOUNT_ATTR_RDONLY, 0, 0, 0), 32)
        _check(libc.syscall(SYS_MOUNT_SETATTR, -100, b"/", AT_RECURSIVE, attr, 32),
               "mount_setattr / read-only")
        shm = ["/dev/shm"] if "/dev/shm" in MASKED and os.path.isdir("/dev/shm") else []
        for path in self.write + shm:
            if path in self.tmpfs:
                self._scratch(path, self.tmpfs[path])
                continue
            _check(libc.mount(path.encode(), path.encode(), None, MS_BIND | MS_REC, None),
                   f"bind {path}")
            clear = ctypes.create_string_buffer(struct.pack("=QQQQ", 0, MOUNT_ATTR_RDONLY, 0, 0), 32)
            _check(libc.syscall(SYS_MOUNT_SETATTR, -100, path.encode(), AT_RECURSIVE, clear, 32),
                   f"mount_setattr {path} writable")
        for hole in self.holes:
            if libc.mount(b"tmpfs", hole.encode(), b"tmpfs",
                          MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"mode=000,size=4k") != 0:
                if ctypes.get_errno() != errno.ENOENT:  # hidden already (under a mask)
                    _fail(f"cover {hole}")

    def _scratch(self, path: str, size: int) -> None:
        """A tmpfs of ``size`` bytes on ``path``, the owner's: made after the tree went
        read-only, so it stays writable; what was in the folder (nothing but empty folders:
        the run just made it) is hidden beneath."""
        uid, gid = self.tmpfs_owner or (self.uid, self.gid)
        opts = f"size={max(size, 4096)},mode=0700,uid={uid},gid={gid}".encode()
        _check(_libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts),
               f"mount tmpfs on {path}")
        for rel in self.tmpfs_dirs:
            sub = os.path.join(path, rel)
            os.makedirs(sub, mode=0o700, exist_ok=True)
            os.chown(sub, uid, gid)

    def _fork_into_pid_ns(self) -> None:
        """Three processes: the waiter (outside, the one ``Popen`` knows), a small init (pid
        1 inside: it reaps the namespace's orphans) and the child (pid 2, which returns and
        execs). The child is not pid 1, whose own signals the kernel ignores: a submission
        that kills itself dies as anywhere else. init tells the waiter, through a pipe, how
        the child ended; the waiter ends the same way."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pid 1 of the new namespace
            os.close(r)
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if self.mount:  # its own /proc: no process but its own is a name there
                _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                   None), "mount /proc")
            child = os.fork()
            if child == 0:
                os.close(w)
                _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                return
            _idle(keep=w)
            while True:  # reap every orphan; end with the child
                try:
                    done, status = os.waitpid(-1, 0)
                except InterruptedError:
                    continue
                except ChildProcessError:
                    os._exit(125)
                if done == child:
                    os.write(w, struct.pack("=i", status))
                    os._exit(0)
        os.close(w)
        _idle(keep=r)
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                os._exit(125)
        told = os.read(r, 4)
        if len(told) == 4:
            status = struct.unpack("=i", told)[0]
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
            os._exit(128 + sig)
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 125)


def _idle(keep: int) -> None:
    """A process that only waits: no capability, no descriptor but ``keep`` (the exec status
    pipe, the child's socket and output are the child's alone)."""
    drop_capabilities()
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.closerange(0, keep)
    os.closerange(keep + 1, 1 << 20)


def drop_capabilities(user: tuple[int, int] | None = None) -> None:
    """Bounding set emptied (up to ``cap_last_cap``), ambient cleared, then (``user``: (uid,
    gid)) no supplementary group and that uid/gid, real, effective and saved, then effective,
    permitted and inheritable emptied: nothing held, nothing an exec could give back."""
    libc = _libc
    for cap in range(last_cap() + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: checked below
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if user is not None:
        try:
            os.setgroups([])
            os.setresgid(user[1], user[1], user[1])
            os.setresuid(user[0], user[0], user[0])
        except OSError as exc:
            os.write(2, f"challenge-welding sandbox: cannot become uid {user[0]} ({exc})\n"
                     .encode())
            os._exit(125)
    header = ctypes.create_string_buffer(struct.pack("=Ii", LINUX_CAPABILITY_VERSION_3, 0), 8)
    data = ctypes.create_string_buffer(24)  # two {effective, permitted, inheritable}, all 0
    if SYS_CAPSET is None or libc.syscall(SYS_CAPSET, header, data) != 0:
        _fail("capset")


def capability_sets(pid: int | str = "self") -> dict:
    """{"CapInh": int, ...} from /proc/<pid>/status."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":\t")
                if key.startswith("Cap"):
                    out[key] = int(value, 16)
    except (OSError, ValueError):
        pass
    return out


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _fail(what: str) -> None:
    err = ctypes.get_errno()
    os.write(2, f"challenge-welding sandbox: {what} failed ({os.strerror(err)})\n".encode())
    os._exit(125)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        _fail(what)


def _loopback_up() -> None:
    """A new network namespace has only ``lo``, down: up, so 127.0.0.1 inside works (and
    reaches nothing but the namespace itself)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


# -- what the kernel lends ------------------------------------------------------------------
_PROBED: dict = {}
# "0": use no namespace (what a Codabench worker lends), to test the other layers alone; a
# comma list ("mount,ipc"): only those of the lent ones
NAMESPACES_ENV = "CHALLENGE_WELDING_NAMESPACES"
# The users participant code runs as, where the evaluator may change user: high uids with no
# passwd entry (no file on the machine belongs to one but a run's scratch). Each run leases one
# of its own (:func:`lease_uid`), as IOI's isolate gives each box its own uid: two runs on one
# machine (an organiser re-scoring in parallel) are then two users, and every same-user check of
# the kernel (signals, ptrace and /proc/<pid>/mem or environ, scheduling, files 0600/0700) keeps
# them apart even without a pid namespace or Landlock. "N": that uid for every run; "none":
# stay the evaluator's user.
SANDBOX_UID_ENV = "CHALLENGE_WELDING_SANDBOX_UID"
DEFAULT_SANDBOX_UID = 64290
SANDBOX_UIDS = range(DEFAULT_SANDBOX_UID, DEFAULT_SANDBOX_UID + 1000)  # 64290..65289
# One gid for every run, no supplementary group: the ACL entry that denies the sandbox our
# folders names this group (:func:`deny`), so that it is the same entry whichever uid a run
# leased. Sharing it gives one run nothing of another's: ptrace and /proc need the uids to
# match too, signals look at uids only, and a run's folders are 0700, its uid's.
SANDBOX_GID = DEFAULT_SANDBOX_UID
# Where the leases live: a lock file per uid in a root-only folder; /run is the machine's (or
# the container's) own, emptied at boot. The temporary folder where /run cannot be used.
LEASE_DIRS = ("/run/challenge-welding/uids", "{tmp}/challenge-welding-uids")
CAP_CHOWN, CAP_SETGID, CAP_SETUID = 0, 6, 7
# this process's leases, by what was asked (None: the range; N: CHALLENGE_WELDING_SANDBOX_UID):
# {"uid", "fd", "how", "users": the Sandboxes using it now}
_LEASES: dict = {}


def sandbox_user(mount_ns: bool, userns: bool = False) -> tuple[tuple[int, int] | None, str]:
    """((uid, gid), why) of the user to run participant code as (install and run), or (None,
    why not).

    Only where the evaluator may change user (root holding CAP_SETUID, CAP_SETGID and
    CAP_CHOWN: an organiser's server; not a Codabench worker, which drops them). The uid is
    leased for the run (:func:`lease_uid`, given back by :func:`unlease_uid`); the gid is
    :data:`SANDBOX_GID`. With a mount namespace the interpreter and environment under ``/root``
    are reachable (bound back under an empty, traversable ``/root``) while our folders are
    not there at all; without one, :func:`user_confines` must first find that the kernel's
    permission checks give that user what it needs and nothing of ours (the reason here is
    then only provisional). Where the namespaces come from a user namespace (``userns``: root
    without CAP_SYS_ADMIN, ``podman run`` as root), that namespace maps the user beside uid 0
    (:meth:`Plan._userns_with`; mapping uid 0 alone, setresuid failed there with EPERM and
    every submission ended with status 125 in the image run as root). ``userns`` is kept for
    the callers' sake: the answer no longer depends on it."""
    want = os.environ.get(SANDBOX_UID_ENV, "").strip().lower()
    if want == "none":
        return None, f"same user as the evaluator ({SANDBOX_UID_ENV}=none)"
    if not sys.platform.startswith("linux") or fcntl is None:  # no leases, no setresuid step
        return None, "same user as the evaluator (not Linux)"
    if os.geteuid() != 0:
        return None, "same user as the evaluator (not root: cannot change user)"
    eff = capability_sets().get("CapEff", 0)
    if not all(eff >> c & 1 for c in (CAP_CHOWN, CAP_SETGID, CAP_SETUID)):
        return None, "same user as the evaluator (uid 0, no capability: CAP_SETUID dropped)"
    forced = int(want) if want.isdigit() and int(want) > 0 else None
    uid, how = lease_uid(forced)
    if uid is None:
        return None, f"same user as the evaluator (uid 0, no capability: {how})"
    who = f"uid {uid} ({how}), gid {SANDBOX_GID}, no groups (install and run"
    if not mount_ns:
        return (uid, SANDBOX_GID), who + "; no mount namespace: the kernel's permission " \
                                         "checks keep it off our folders)"
    return (uid, SANDBOX_GID), who + ")"


def lease_uid(forced: int | None = None) -> tuple[int | None, str]:
    """(uid, how) leased by this process for a run, or (None, why not); one lease per process,
    reused by its later runs (:func:`unlease_uid` counts them).

    A lock file per uid of :data:`SANDBOX_UIDS` (``flock`` LOCK_EX|LOCK_NB, O_CLOEXEC) in a
    root-only folder (:func:`lease_folder`), held for the process's life: the kernel drops it
    when the process dies, however it dies, so a uid is never leased twice at once and never
    lost. The search starts at a random offset, so that two containers (each its own /run,
    blind to each other's leases) rarely pick the same uid. Every process left under the uid
    (a killed run's: real, effective or saved uid) is killed first (:func:`kill_user`).
    ``forced`` (``CHALLENGE_WELDING_SANDBOX_UID=N``): that uid, leased if free, shared with
    whoever holds it if not (the organiser asked for one uid): nothing is killed then."""
    held = _LEASES.get(forced)
    if held:
        if held["users"] == 0 and held["fd"] is not None:
            kill_user(held["uid"])  # an earlier run's leftovers (belt and braces: the reaper)
        held["users"] += 1
        return held["uid"], held["how"]
    folder = lease_folder()
    if folder is None and forced is None:
        return None, "no root-only folder for the uid leases (/run/challenge-welding/uids)"
    uids = [forced] if forced is not None else list(SANDBOX_UIDS)
    start = int.from_bytes(os.urandom(4), "little") % len(uids)
    for uid in uids[start:] + uids[:start]:
        fd = _lock(folder, uid) if folder is not None else None
        if fd is None and forced is None:
            continue  # another run's
        if fd is not None:
            kill_user(uid)
        how = f"leased from {SANDBOX_UIDS.start}..{SANDBOX_UIDS.stop - 1}" if forced is None \
            else f"{SANDBOX_UID_ENV}={forced}" + ("" if fd is not None else ", shared")
        _LEASES[forced] = {"uid": uid, "fd": fd, "how": how, "users": 1}
        return uid, how
    return None, f"every uid of {SANDBOX_UIDS.start}..{SANDBOX_UIDS.stop - 1} is leased"


def unlease_uid(uid: int) -> None:
    """A run of this process using ``uid`` is over: when none is left, every process still
    under it is killed (the lock stays held, for the process's next run)."""
    for held in _LEASES.values():
        if held["uid"] == uid and held["users"] > 0:
            held["users"] -= 1
            if held["users"] == 0 and held["fd"] is not None:
                kill_user(uid)
            return


def _lock(folder: str, uid: int) -> int | None:
    """The lock file of ``uid`` opened and locked (its descriptor), None if another holds it."""
    try:
        fd = os.open(os.path.join(folder, f"{uid}.lock"),
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def lease_folder() -> str | None:
    """The first of :data:`LEASE_DIRS` made or found root-only (:func:`root_only`), else None."""
    for folder in LEASE_DIRS:
        folder = folder.format(tmp=tempfile.gettempdir())
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        except OSError:
            continue
        if root_only(folder):
            return folder
    return None


def root_only(folder: str) -> bool:
    """Whether no one but root can have put or can change what ``folder`` holds: the folder
    root's, a real folder (not a link), writable by root alone; each folder above it root's
    and writable by root alone or sticky (``/tmp``: no one removes or renames a folder of
    root's there). A lease folder someone else made first could hand one uid to two runs."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        return False
    parent = os.path.dirname(os.path.realpath(folder))
    while True:
        try:
            st = os.stat(parent)
        except OSError:
            return False
        if st.st_uid != 0 or (st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX):
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)


def processes_of(uid: int) -> list[int]:
    """The visible processes (not zombies) whose real, effective or saved uid is ``uid`` and
    that bear the sandbox's marks: gid :data:`SANDBOX_GID` among their gids, an empty
    bounding set and no_new_privs (every process of a run has them from its first
    instruction: :func:`drop_capabilities`, then the Landlock/seccomp step). The uid range overlaps ranges that other
    software hands out (systemd's DynamicUser= uses 61184..65519; rootless containers map
    subordinate uids): a process of such a service or container has the uid by chance, not
    the marks, and must never be killed for a run's leftover."""
    out = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as fh:
                st = dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)
            ids = [int(x) for x in st["Uid"].split()[:3]]
            gids = [int(x) for x in st["Gid"].split()[:3]]
            marked = (SANDBOX_GID in gids and int(st["CapBnd"], 16) == 0
                      and st.get("NoNewPrivs", "").strip() == "1")
        except (OSError, ValueError, KeyError):
            continue  # gone, or a kernel thread's odd line
        if uid in ids and marked and not st.get("State", "").startswith(("Z", "X")):
            out.append(pid)
    return out


def kill_user(uid: int, rounds: int = 100) -> int:
    """SIGKILL every process of ``uid`` (:func:`processes_of`), round after round until none is
    left (one forking while it is killed is caught in the next round); how many were killed.
    A leased uid's processes are a run's alone: they must not outlive it."""
    killed: set = set()
    for _ in range(rounds):
        found = processes_of(uid)
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass  # gone
        time.sleep(0.01)
    return len(killed)


# The machine's shared folders a user of its own may write where no mount namespace gives it
# its own (world-writable, sticky): what it leaves there is removed at the end of its run.
LITTER = ("/tmp", "/var/tmp", "/dev/shm")


def remove_litter(uid: int, folders=LITTER) -> list[str]:
    """Every entry of ``folders`` (not deeper: a sticky folder's entries are their owners'
    alone, so only there can that uid have made one) owned by the leased ``uid``, removed, a
    folder with what it holds (``shutil.rmtree``: by descriptors, no link followed); the
    paths removed. Called once every process of the uid is dead (:func:`unlease_uid`), so
    nothing is added meanwhile; a link is removed, never its target."""
    removed = []
    for top in folders:
        try:
            with os.scandir(top) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                removed.append(entry.path)
            except OSError:
                continue  # gone meanwhile, or not ours to remove: left as it is
    return removed


def access_as(user: tuple[int, int], paths) -> dict:
    """{path: "rwx" letters or "-"} of what ``user`` (no supplementary group) may do to each
    path, answered by the kernel itself: ``test -r/-w/-x`` in a shell run as that user (a path
    under a folder it may not traverse is "---")."""
    paths = [str(p) for p in paths]
    if not paths:
        return {}
    script = ('for p do r=-; w=-; x=-; test -r "$p" && r=r; test -w "$p" && w=w; '
              'test -x "$p" && x=x; echo "$r$w$x"; done')
    try:
        out = subprocess.run(["/bin/sh", "-c", script, "sh", *paths], user=user[0],
                             group=user[1], extra_groups=[], env={}, cwd="/", timeout=30,
                             capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        out = []
    return {p: (out[i] if i < len(out) else "---") for i, p in enumerate(paths)}


def user_confines(user: tuple[int, int], reach, sealed, ours) -> tuple[bool, str, list]:
    """Without a mount namespace: whether ``user`` can run participant code here with the
    kernel's permission checks as the file layer, (ok, why not, [(path, descriptor)] denied).

    ``reach``: what it must read (the interpreter, the environments' cache, uv, child.py);
    ``sealed``: what it must neither read, traverse nor write (input_data, reference_data,
    the output folder): each one gets, for the run, the ACL entry that gives the sandbox's
    group no permission (:func:`deny`; other users keep what they had), then the kernel is
    asked again. Each one, even one closed already: it may be closed by another run's entry,
    which that run's end takes out unless this run holds the folder too (:func:`release`).
    ``ours`` (the evaluator's package and site-packages): it may read them (child.py is
    there; they are public code), never write them."""
    seen = access_as(user, [*reach, *sealed, *ours])
    far = [p for p in reach if p and "r" not in seen[str(p)]]
    if far:
        return False, f"{far[0]} is out of reach of uid {user[0]} without a mount namespace", []
    written = [p for p in ours if "w" in seen[str(p)]]
    if written:
        return False, f"uid {user[0]} could write {written[0]}", []
    denied = []
    for path in sealed:
        if not os.path.exists(path):
            continue
        try:
            denied.append((str(path), deny(str(path), user[1])))
        except OSError as exc:
            if seen[str(path)] == "---" and exc.errno in (errno.EOPNOTSUPP, errno.ENOTSUP):
                continue  # no ACL here, and none needed: its modes keep the user out
            release(denied, user[1])
            return False, f"{path} is open to uid {user[0]} and no ACL can close it " \
                          f"({exc.strerror})", []
    if denied:
        again = access_as(user, [p for p, _ in denied])
        still = [p for p, _ in denied if again[p] != "---"]
        if still:
            release(denied, user[1])
            return False, f"{still[0]} stays open to uid {user[0]} under an ACL", []
    return True, "", denied


# POSIX ACLs as the kernel stores them (system.posix_acl_access: a version, then entries of
# tag, permission and id, sorted by tag then id). Written by hand: one named-group entry is a
# few bytes, and pylibacl would be one more compiled dependency of the evaluator image.
ACL_XATTR, ACL_VERSION, ACL_UNDEFINED = "system.posix_acl_access", 2, 0xFFFFFFFF
ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_OTHER = 1, 2, 4, 8, 0x10, 0x20
LOCK_WAIT = 10.0  # seconds a deny waits for another run's release (it holds the lock for µs)

# Why a named-group entry, and why a shared lock on the folder (two runs at once, issue 29):
# every run's user has the gid SANDBOX_GID and no other group, so one entry "group SANDBOX_GID:
# no permission" denies every run's user (the kernel stops at a matching named-group entry that
# grants nothing: the request never falls through to "other"), whichever uid it leased. Each
# run holds a shared flock on the folder itself (its inode: the lock holds across containers
# that share the folder but not /run) from before it writes the entry to its end. Runs add the
# same entry under the shared lock (their writes agree whatever their order); a run that ends
# removes it only if it gets the lock exclusively (LOCK_NB): no other run holds the folder then,
# and none can start adding before the removal is done. Before, each run wrote back the ACL it
# had found: the first run to end wiped the second's entry while its child ran (measured:
# reference_data "r-x" to the second run's user after the first's release). A run killed
# before its release leaves the entry (it only denies the sandbox): the next run to end
# removes it. By hand: ``setfacl -x g:64290 PATH``.


def _acl(fd: int) -> list:
    """The entries of the ACL of the open file ``fd`` ([] without one)."""
    try:
        raw = os.getxattr(fd, ACL_XATTR)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.EOPNOTSUPP):
            raise
        return []
    return [struct.unpack_from("<HHI", raw, 4 + 8 * i) for i in range((len(raw) - 4) // 8)]


def _set_acl(fd: int, entries: list) -> None:
    entries = sorted(entries, key=lambda e: (e[0], e[2]))
    os.setxattr(fd, ACL_XATTR, struct.pack("<I", ACL_VERSION)
                + b"".join(struct.pack("<HHI", *e) for e in entries))


def deny(path: str, gid: int = SANDBOX_GID) -> int:
    """Add to ``path``'s ACL an entry giving the group ``gid`` no permission (the entries of
    every other user and group, and the mode, unchanged), under a shared lock on ``path``;
    the descriptor holding the lock, for :func:`release` (the run's life)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        end = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.01)
        entries = _acl(fd) or _base(fd)
        if (ACL_GROUP, 0, gid) not in entries:
            entries = [e for e in entries if not (e[0] == ACL_GROUP and e[2] == gid)]
            entries.append((ACL_GROUP, 0, gid))
            if not any(e[0] == ACL_MASK for e in entries):  # required beside a named entry:
                group = next(e[1] for e in entries if e[0] == ACL_GROUP_OBJ)  # the group's
                entries.append((ACL_MASK, group, ACL_UNDEFINED))  # bits, unchanged
            _set_acl(fd, entries)
    except BaseException:
        os.close(fd)
        raise
    return fd


def release(denied, gid: int = SANDBOX_GID) -> None:
    """The entries :func:`deny` made taken out, of each folder no other run holds (see why
    above); every lock dropped. ``denied``: [(path, descriptor)]."""
    for _path, fd in denied:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # another run relies on the entry: it stays
            continue
        try:
            _drop(fd, ACL_GROUP, gid)
        finally:
            os.close(fd)


def allow(path: str, uid: int, perm: int) -> bool:
    """Give ``uid`` alone ``perm`` (rwx bits) on ``path`` by a named-user entry (the mask
    widened by ``perm`` only: the owning group's entry still limits the group); False where
    the file system keeps no ACL."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        entries = _acl(fd) or _base(fd)
        mask = next((e[1] for e in entries if e[0] == ACL_MASK),
                    next(e[1] for e in entries if e[0] == ACL_GROUP_OBJ))
        entries = [e for e in entries if e[0] != ACL_MASK and not (e[0] == ACL_USER and e[2] == uid)]
        _set_acl(fd, [*entries, (ACL_USER, perm, uid), (ACL_MASK, mask | perm, ACL_UNDEFINED)])
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def disallow(path: str, uid: int) -> None:
    """The entry :func:`allow` made taken out (nothing if none, or gone)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            _drop(fd, ACL_USER, uid)
        finally:
            os.close(fd)


def _base(fd: int) -> list:
    """The three entries the mode alone stands for."""
    mode = os.fstat(fd).st_mode
    return [(ACL_USER_OBJ, mode >> 6 & 7, ACL_UNDEFINED),
            (ACL_GROUP_OBJ, mode >> 3 & 7, ACL_UNDEFINED), (ACL_OTHER, mode & 7, ACL_UNDEFINED)]


def _drop(fd: int, tag: int, xid: int) -> None:
    """The named entry (``tag``, ``xid``) taken out of ``fd``'s ACL; with no named entry left,
    the mask too where it takes nothing from the owning group (then the group's bits are what
    they were with it), and then the ACL itself (the mode says it all, as before)."""
    try:
        entries = [e for e in _acl(fd) if not (e[0] == tag and e[2] == xid)]
        named = any(e[0] in (ACL_USER, ACL_GROUP) for e in entries)
        group = next((e[1] for e in entries if e[0] == ACL_GROUP_OBJ), 0)
        mask = next((e for e in entries if e[0] == ACL_MASK), None)
        if not named and mask is not None and mask[1] & group == group:
            entries.remove(mask)
        if len(entries) == 3 and not named:
            os.removexattr(fd, ACL_XATTR)
        elif entries:
            _set_acl(fd, entries)
    except OSError:
        pass  # gone, or ACLs no longer writable: a stale entry (deny's only denies the sandbox)


def probe() -> dict:
    """{"userns", "mount", "ipc", "net", "pid"}: which namespaces this process may make
    (tried in a throwaway process, once per run of the evaluator); all False off Linux."""
    names = ("userns", "mount", "ipc", "net", "pid")
    want = os.environ.get(NAMESPACES_ENV, "").strip()
    if want == "0":
        return dict.fromkeys(names, False)
    if want:
        lent = _probe(names)
        keep = set(want.replace(" ", "").split(",")) | {"userns"}
        return {n: lent[n] and n in keep for n in names}
    return _probe(names)


def _probe(names) -> dict:
    if _PROBED:
        return dict(_PROBED)
    if _libc is None or SYS_CAPSET is None:
        _PROBED.update(dict.fromkeys(names, False))
        return dict(_PROBED)
    root = os.geteuid() == 0 and _holds_sys_admin()
    plan = Plan(userns=not root, mount=True, ipc=True, net=True, pid=True)
    ok = _try(plan)
    if not ok:  # the pid namespace alone may be refused (nested containers): try without it
        plan.pid = False
        ok = _try(plan)
    _PROBED.update(userns=ok and plan.userns, mount=ok, ipc=ok, net=ok, pid=ok and plan.pid)
    return dict(_PROBED)


def _holds_sys_admin() -> bool:
    return bool(capability_sets().get("CapEff", 0) >> 21 & 1)


def _try(plan: Plan) -> bool:
    plan.prepare()

    def pre():
        plan.enter()
        drop_capabilities()
    try:
        return subprocess.run(["/bin/sh", "-c", "exit 0"], preexec_fn=pre, timeout=30,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
