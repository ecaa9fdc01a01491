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
   ``capset``, no group and uid/gid 64290, so that the kernel's same-user checks (signals,
   SIGIO, scheduling, ptrace, /proc, root's socket files) refuse by themselves. Without a
   mount namespace only where the kernel's permission checks give it what it must read and
   nothing of ours (:func:`user_confines`, an ACL entry denying it the run's data folders).

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

import ctypes
import errno
import os
import platform
import signal
import socket
import struct
import subprocess
import sys
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
# The user participant code runs as, where the evaluator may change user: a high uid and gid
# with no passwd entry and no group (no file on the machine belongs to it but its scratch);
# "none": stay the evaluator's user.
SANDBOX_UID_ENV = "CHALLENGE_WELDING_SANDBOX_UID"
DEFAULT_SANDBOX_UID = 64290
CAP_CHOWN, CAP_SETGID, CAP_SETUID = 0, 6, 7


def sandbox_user(mount_ns: bool, userns: bool = False) -> tuple[tuple[int, int] | None, str]:
    """((uid, gid), why) of the user to run participant code as (install and run), or (None,
    why not).

    Only where the evaluator may change user (root holding CAP_SETUID, CAP_SETGID and
    CAP_CHOWN: an organiser's server; not a Codabench worker, which drops them). With a mount
    namespace the interpreter and environment under ``/root`` are reachable (bound back under
    an empty, traversable ``/root``) while our folders are not there at all; without one,
    :func:`user_confines` must first find that the kernel's permission checks give that user
    what it needs and nothing of ours (the reason here is then only provisional). Where the
    namespaces come from a user namespace (``userns``: root without CAP_SYS_ADMIN, ``podman
    run`` as root), that namespace maps the user beside uid 0 (:meth:`Plan._userns_with`;
    mapping uid 0 alone, setresuid failed there with EPERM and every submission ended with
    status 125 in the image run as root). ``userns`` is kept for the callers' sake: the
    answer no longer depends on it."""
    want = os.environ.get(SANDBOX_UID_ENV, "").strip().lower()
    if want == "none":
        return None, f"same user as the evaluator ({SANDBOX_UID_ENV}=none)"
    uid = int(want) if want.isdigit() and int(want) > 0 else DEFAULT_SANDBOX_UID
    if os.geteuid() != 0:
        return None, "same user as the evaluator (not root: cannot change user)"
    eff = capability_sets().get("CapEff", 0)
    if not all(eff >> c & 1 for c in (CAP_CHOWN, CAP_SETGID, CAP_SETUID)):
        return None, "same user as the evaluator (uid 0, no capability: CAP_SETUID dropped)"
    if not mount_ns:
        return (uid, uid), (f"uid {uid}, gid {uid}, no groups (install and run; no mount "
                            "namespace: the kernel's permission checks keep it off our folders)")
    return (uid, uid), f"uid {uid}, gid {uid}, no groups (install and run)"


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
    kernel's permission checks as the file layer, (ok, why not, [(path, saved ACL)] denied).

    ``reach``: what it must read (the interpreter, the environments' cache, uv, child.py);
    ``sealed``: what it must neither read, traverse nor write (input_data, reference_data,
    the output folder): each one it may reach gets, for the run, an ACL entry naming that
    uid with no permission (:func:`deny`; other users keep what they had), then the kernel is
    asked again; ``ours`` (the evaluator's package and site-packages): it may read them
    (child.py is there; they are public code), never write them."""
    seen = access_as(user, [*reach, *sealed, *ours])
    far = [p for p in reach if p and "r" not in seen[str(p)]]
    if far:
        return False, f"{far[0]} is out of reach of uid {user[0]} without a mount namespace", []
    written = [p for p in ours if "w" in seen[str(p)]]
    if written:
        return False, f"uid {user[0]} could write {written[0]}", []
    denied = []
    for path in sealed:
        if seen[str(path)] != "---":
            try:
                denied.append((str(path), deny(str(path), user[0])))
            except OSError as exc:
                release(denied)
                return False, f"{path} is open to uid {user[0]} and no ACL can close it " \
                              f"({exc.strerror})", []
    if denied:
        again = access_as(user, [p for p, _ in denied])
        still = [p for p, _ in denied if again[p] != "---"]
        if still:
            release(denied)
            return False, f"{still[0]} stays open to uid {user[0]} under an ACL", []
    return True, "", denied


# POSIX ACLs as the kernel stores them (system.posix_acl_access: a version, then entries of
# tag, permission and id, sorted by tag then id). Written by hand: one named-user entry is a
# few bytes, and pylibacl would be one more compiled dependency of the evaluator image.
ACL_XATTR, ACL_VERSION, ACL_UNDEFINED = "system.posix_acl_access", 2, 0xFFFFFFFF
ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_OTHER = 1, 2, 4, 8, 0x10, 0x20


def deny(path: str, uid: int) -> bytes | None:
    """Add to ``path``'s ACL an entry giving ``uid`` no permission (the entries of every other
    user and group, and the mode, unchanged); the ACL before (None: none) to :func:`release`."""
    try:
        saved = os.getxattr(path, ACL_XATTR, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.EOPNOTSUPP):
            raise
        saved = None
    if saved:
        entries = [struct.unpack_from("<HHI", saved, 4 + 8 * i) for i in range((len(saved) - 4) // 8)]
    else:
        mode = os.lstat(path).st_mode
        entries = [(ACL_USER_OBJ, mode >> 6 & 7, ACL_UNDEFINED), (ACL_GROUP_OBJ, mode >> 3 & 7,
                   ACL_UNDEFINED), (ACL_OTHER, mode & 7, ACL_UNDEFINED)]
    entries = [e for e in entries if not (e[0] == ACL_USER and e[2] == uid)]
    entries.append((ACL_USER, 0, uid))
    if not any(e[0] == ACL_MASK for e in entries):  # required beside a named entry: the
        group = next(e[1] for e in entries if e[0] == ACL_GROUP_OBJ)  # group's bits, unchanged
        entries.append((ACL_MASK, group, ACL_UNDEFINED))
    entries.sort(key=lambda e: (e[0], e[2]))
    os.setxattr(path, ACL_XATTR, struct.pack("<I", ACL_VERSION)
                + b"".join(struct.pack("<HHI", *e) for e in entries), follow_symlinks=False)
    return saved


def release(denied) -> None:
    """Put back the ACLs :func:`deny` changed."""
    for path, saved in denied:
        try:
            if saved is None:
                os.removexattr(path, ACL_XATTR, follow_symlinks=False)
            else:
                os.setxattr(path, ACL_XATTR, saved, follow_symlinks=False)
        except OSError:
            pass  # gone: nothing to put back (a stale entry only denies the sandbox's uid)


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
