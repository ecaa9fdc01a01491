"""Confine every line of participant code: Landlock, a seccomp filter, rlimits (Linux).

Codabench runs the ingestion as root with 14 capabilities dropped and no-new-privileges,
without user or mount namespaces: no other uid, no chroot. Where the kernel lends more
(root elsewhere, or unprivileged user namespaces), layers.py first puts the process in
namespaces of its own (mount, pid, network, IPC), as a user of its own where root may
change user (install and run; without a mount namespace only where that user's permissions
keep it off our folders: :meth:`Sandbox.choose_user`), and empties every capability set in
every case. Then what an unprivileged
process can still do to its children, and what this module applies between fork and exec
(a ``preexec_fn``: both survive exec and are inherited by every descendant, and neither
can be lifted afterwards):

* **no_new_privs** first (Landlock and seccomp require it without CAP_SYS_ADMIN);
* **Landlock** (Linux >= 5.13): the process may read only its environment, the system's
  libraries and interpreter, and write only its scratch folders. Rules allow, they never
  deny, so a folder that must stay out of reach inside an allowed one (the evaluator's
  site-packages under ``/usr``) is carved out: the allowed folder's other entries get the
  rule instead (:func:`carve`). ABI >= 4: TCP bind/connect refused (none allowed); ABI >= 6:
  signals and abstract Unix sockets scoped to the sandbox, so the ingestion cannot be
  signalled. A Landlock domain also refuses ptrace of any process outside it;
* **seccomp** (a hand-built BPF filter, :func:`seccomp_program`): ``setsid``/``setpgid``
  refused, so every process of the submission stays in the process group the preexec made
  and one ``killpg`` ends them all; signals (``kill``, ``tgkill``, ``rt_*sigqueueinfo``,
  SIGIO owners through ``fcntl``/``ioctl``), scheduling, priorities, resource limits and
  ``process_vm_*`` allowed only on the submission's own processes, refused (EPERM) on every
  other process of the machine: the ingestion and all its threads, other runs; ``tkill``,
  ``pidfd_send_signal``, ``vmsplice``/``splice``/``tee`` and io_uring refused. It is the
  guard where Landlock scoping and a separate user are missing, and a second one where not;
* **rlimits**: no core files; at run time no file larger than the scratch's bound
  (``RLIMIT_FSIZE``, SIGXFSZ ignored: the write fails with EFBIG in the submission's code).
  Where a mount namespace is lent, the scratch folder is a tmpfs of that size of its own
  (layers.py), so what the submission writes can never fill our file system; where none is,
  a fill is at least told apart from ours (run/ingest.py names what the scratch holds).

A fork storm is the reaper's watchdog's business (reaper.Watchdog): RLIMIT_NPROC does not
bind root.

Why a hand-written ctypes binding: the PyPI ``landlock`` package is a pre-release (0.x,
alpha) and has no seccomp; the three Landlock syscalls and one prctl are a few lines each.

Where the kernel lacks Landlock, a mount namespace confines the files if one is lent; if
none is, ``ingest`` refuses unless ``--unsafe-unconfined``, and then the run says so (a
warning, ``ingestion.json``'s ``sandbox`` section); organisers can refuse such runs
(``integrity.require_sandbox`` in the scoring config). ``CHALLENGE_WELDING_LANDLOCK_ABI_MAX``
caps the ABI used (0 = no Landlock), to test the fallbacks on a newer kernel.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
try:
    import resource
except ImportError:  # Windows: no rlimits, and no confinement to apply them in
    resource = None
import site
import stat
import struct
import sys
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import challenge_welding
from challenge_welding.ingestion.confine import layers
from challenge_welding.ingestion.options import IngestOptions

ABI_MAX_ENV = "CHALLENGE_WELDING_LANDLOCK_ABI_MAX"
KILL_TIMEOUT_ENV = "CHALLENGE_WELDING_KILL_TIMEOUT"  # seconds a group kill may take
# The bound of what participant code may write at run time, in MiB: its scratch folder's
# size (a tmpfs of its own where a mount namespace is lent) and the largest file it may write
SCRATCH_MB_ENV = "CHALLENGE_WELDING_SCRATCH_MB"
DEFAULT_SCRATCH_MB = 2048
SIGXFSZ = 25  # the same on x86_64 and aarch64


def scratch_bytes() -> int:
    """The scratch's bound in bytes (``CHALLENGE_WELDING_SCRATCH_MB``, default 2048 MiB)."""
    want = os.environ.get(SCRATCH_MB_ENV, "").strip()
    mb = float(want) if want.replace(".", "", 1).isdigit() and float(want) > 0 else DEFAULT_SCRATCH_MB
    return int(mb * (1 << 20))

# Syscall numbers: Landlock's are the same on x86_64 and aarch64 (the generic table).
_SYS = {
    "x86_64": dict(landlock_create_ruleset=444, landlock_add_rule=445, landlock_restrict_self=446,
                   kill=62, tkill=200, tgkill=234, rt_sigqueueinfo=129, rt_tgsigqueueinfo=297,
                   pidfd_send_signal=424, pidfd_open=434, setsid=112, setpgid=109,
                   fcntl=72, ioctl=16, setpriority=141, sched_setparam=142,
                   sched_setscheduler=144, sched_setaffinity=203, sched_setattr=314,
                   ioprio_set=251, prlimit64=302, process_vm_readv=310, process_vm_writev=311,
                   migrate_pages=256, move_pages=279, pidfd_getfd=438, process_madvise=440,
                   setns=308, socket=41, vmsplice=278, splice=275, tee=276, io_uring_setup=425,
                   io_uring_enter=426, io_uring_register=427, chmod=90, fchmod=91,
                   fchmodat=268, fchmodat2=452, chown=92, fchown=93, lchown=94, fchownat=260,
                   setxattr=188, lsetxattr=189, fsetxattr=190, removexattr=197,
                   lremovexattr=198, fremovexattr=199, setxattrat=463, removexattrat=466,
                   audit_arch=0xC000003E),
    "aarch64": dict(landlock_create_ruleset=444, landlock_add_rule=445, landlock_restrict_self=446,
                    kill=129, tkill=130, tgkill=131, rt_sigqueueinfo=138, rt_tgsigqueueinfo=240,
                    pidfd_send_signal=424, pidfd_open=434, setsid=157, setpgid=154,
                    fcntl=25, ioctl=29, setpriority=140, sched_setparam=118,
                    sched_setscheduler=119, sched_setaffinity=122, sched_setattr=274,
                    ioprio_set=30, prlimit64=261, process_vm_readv=270, process_vm_writev=271,
                    migrate_pages=238, move_pages=239, pidfd_getfd=438, process_madvise=440,
                    setns=268, socket=198, vmsplice=75, splice=76, tee=77, io_uring_setup=425,
                    io_uring_enter=426, io_uring_register=427, fchmod=52, fchmodat=53,
                    fchmodat2=452, fchown=55, fchownat=54, setxattr=5, lsetxattr=6,
                    fsetxattr=7, removexattr=14, lremovexattr=15, fremovexattr=16,
                    setxattrat=463, removexattrat=466, audit_arch=0xC00000B7),
}
SYS = _SYS.get(platform.machine())

# Landlock access rights (uapi/linux/landlock.h) and the ABI that introduced them.
FS = dict(execute=1 << 0, write_file=1 << 1, read_file=1 << 2, read_dir=1 << 3,
          remove_dir=1 << 4, remove_file=1 << 5, make_char=1 << 6, make_dir=1 << 7,
          make_reg=1 << 8, make_sock=1 << 9, make_fifo=1 << 10, make_block=1 << 11,
          make_sym=1 << 12, refer=1 << 13, truncate=1 << 14, ioctl_dev=1 << 15)
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1,
             5: (1 << 16) - 1}
FILE_ONLY = FS["execute"] | FS["write_file"] | FS["read_file"] | FS["truncate"] | FS["ioctl_dev"]
READ = FS["execute"] | FS["read_file"] | FS["read_dir"]
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2

# System folders a Python process with numpy, OpenCV, TensorFlow or PyTorch reads.
SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc", "/proc",
               "/sys")
# Device nodes opened read-write: the usual ones, shared memory and the GPU's (CDI mounts them).
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/shm",
           "/dev/dri", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
           "/dev/nvidia-modeset", "/dev/nvidia-caps")

_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def kernel_abi() -> int:
    """The kernel's Landlock ABI (0: none, or not Linux)."""
    if _libc is None or SYS is None:
        return 0
    abi = _libc.syscall(SYS["landlock_create_ruleset"], None, ctypes.c_size_t(0),
                        ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(0, abi)


def usable_abi() -> int:
    """The kernel's ABI, capped by CHALLENGE_WELDING_LANDLOCK_ABI_MAX when set."""
    abi = kernel_abi()
    cap = os.environ.get(ABI_MAX_ENV, "").strip()
    return min(abi, int(cap)) if cap.isdigit() else abi


def carve(root: str, holes) -> list[str]:
    """Paths that together cover ``root`` minus every folder or file in ``holes``.

    A hole strictly inside ``root`` is cut out by listing the folders on the way to it and
    keeping their other entries; a symlinked entry is kept only when its target is in no hole.
    """
    root = os.path.realpath(root)
    inside = [h for h in holes if h == root or h.startswith(root.rstrip("/") + "/")]
    if not inside:
        return [root]
    if root in inside or not os.path.isdir(root):
        return []
    out = []
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return []
    for name in entries:
        path = os.path.join(root, name)
        real = os.path.realpath(path)
        if real != path and any(real == h or real.startswith(h + "/") or h.startswith(real + "/")
                                for h in holes):
            continue
        out += carve(path, holes) if real == path else [real]
    return out


@dataclass
class Policy:
    """What one confined process tree may touch. Paths are resolved by :meth:`rules`."""

    read: list = field(default_factory=list)    # read + execute
    write: list = field(default_factory=list)   # everything
    holes: list = field(default_factory=list)   # never reachable through ``read``
    network: bool = False                       # TCP bind/connect allowed
    abi: int = 0                                # Landlock ABI to use (0: none)

    def __post_init__(self):
        self.read, self.write, self.holes = ([str(p) for p in ps if p]
                                             for ps in (self.read, self.write, self.holes))

    def rules(self) -> list[tuple[str, int]]:
        """[(path, access)] of existing paths, holes carved out of the read rules."""
        holes = sorted({os.path.realpath(h) for h in self.holes if os.path.exists(h)})
        handled = self.handled_fs()
        out = []
        for path in self.read:
            if os.path.exists(path):
                out += [(p, READ) for p in carve(path, holes)]
        for path in self.write:
            if os.path.exists(path):
                out.append((os.path.realpath(path), handled))
        for path in DEVICES:
            if os.path.exists(path):
                out.append((path, handled))
        for name in _nvidia_nodes():
            out.append((name, handled))
        return [(p, acc if os.path.isdir(p) else acc & FILE_ONLY & handled) for p, acc in out]

    def handled_fs(self) -> int:
        return FS_BY_ABI[min(self.abi, 5)] if self.abi else 0

    def describe(self) -> dict:
        """What is in force, for ingestion.json."""
        if not self.abi:
            return {"landlock_abi": None, "fs": "not confined (no Landlock)",
                    "net": "not confined", "scoping": []}
        return {"landlock_abi": self.abi,
                "fs": {"read": sorted(set(self.read)), "write": sorted(set(self.write)),
                       "devices": [d for d in DEVICES if os.path.exists(d)] + _nvidia_nodes(),
                       "denied": sorted({os.path.realpath(h) for h in self.holes})},
                "net": ("TCP allowed" if self.network else "TCP bind and connect denied")
                if self.abi >= 4 else "not confined (Landlock ABI < 4)",
                "scoping": ["signal", "abstract_unix_socket"] if self.abi >= 6 else []}


def _nvidia_nodes() -> list[str]:
    try:
        return sorted(f"/dev/{n}" for n in os.listdir("/dev") if n[:6] == "nvidia" and n[6:].isdigit())
    except OSError:
        return []


# fcntl/ioctl commands that choose who gets a file's SIGIO (and with F_SETSIG, which signal)
F_SETOWN, F_SETSIG, F_SETOWN_EX, FIOSETOWN, SIOCSPGRP = 8, 10, 15, 0x8901, 0x8902
AF_INET, AF_INET6, AF_PACKET = 2, 10, 17  # socket(2) families refused without network
SCHED_OTHER, SCHED_BATCH, SCHED_IDLE, SCHED_RESET_ON_FORK = 0, 3, 5, 0x40000000
PRIO_PROCESS, PRIO_PGRP, IOPRIO_WHO_PROCESS, IOPRIO_WHO_PGRP = 0, 1, 1, 2
IOPRIO_CLASS_MASK, IOPRIO_CLASS_RT = 0x7 << 13, 1 << 13
# refused whatever the arguments: no library a submission needs calls them on a process
# other than itself, and each would reach beyond it (or keep the hand-over memory: below)
REFUSED = ("setsid", "setpgid", "tkill", "pidfd_send_signal", "pidfd_getfd", "process_madvise",
           "sched_setattr", "setns", "vmsplice", "splice", "tee")
NOT_THERE = ("io_uring_setup", "io_uring_enter", "io_uring_register")  # ENOSYS: libraries fall back
# A process that stays the evaluator's user with no mount namespace (a Codabench worker: uid 0,
# no capability) owns the evaluator's files: the owner may chmod them without CAP_FOWNER, and
# Landlock has no right for modes or extended attributes (a POSIX ACL is a mode too). Measured
# as the worker: predict()'s chmod of the output folder (0o000, 0o777) and of an input file
# went through. The chmod family is made a no-op (success, nothing changed) rather than
# EPERM: shutil.copy/copy2/copytree and copymode chmod their copy (EPERM there fails an honest
# copy of model files to scratch), and a submission's own scratch files are created with the
# modes they need. chown and the xattr writes: EPERM (no honest predict() calls them, and
# shutil's xattr copy ignores EPERM).
MODES_NOOP = ("chmod", "fchmod", "fchmodat", "fchmodat2")
MODES_REFUSED = ("chown", "fchown", "lchown", "fchownat", "setxattr", "lsetxattr", "fsetxattr",
                 "removexattr", "lremovexattr", "fremovexattr", "setxattrat", "removexattrat")


def seccomp_program(own_pgid: int | None, network: bool = True, modes: bool = True) -> bytes:
    """The BPF program (struct sock_filter[]) of the last line of defence.

    ``own_pgid``: the submission's process group, i.e. the pid of its first process (the
    preexec made it a group leader and ``setsid``/``setpgid`` are refused, so every process
    of the submission is in it for good). A foreign architecture (i386 on x86_64, x32) is
    refused whole: no bypass by ABI. Every other refusal is EPERM.

    Why no list of protected pids: a snapshot of the ingestion's threads misses those it
    starts later (the output drain, the watchdog, decoders), and other runs' processes are
    on no list. A seccomp filter cannot ask the kernel which group a pid is in, so the rule
    names the only targets that are provably the submission's own, whatever else runs:

    * ``0`` (the caller itself or its group, as the kernel reads it);
    * ``own_pgid``: the group's leader, the first process; while any process of the group
      lives, the kernel keeps that number allocated to the group (a struct pid is freed only
      when no task uses it as pid or pgid), so it never names a foreign process;
    * ``-own_pgid``: the whole group (kill, F_SETOWN).

    Hence: kill/rt_sigqueueinfo to 0, own_pgid or -own_pgid only; tgkill/rt_tgsigqueueinfo
    only inside the first process (raise(), pthread_kill() there: tgkill checks that the
    thread is of that process); sched_setaffinity/setparam/setscheduler, migrate_pages,
    move_pages, process_vm_readv/writev and prlimit64 (writes; reads are harmless) only on
    0 or own_pgid; setpriority and ioprio_set only for the caller or its group, never a
    higher priority (negative nice) or the real-time I/O class; sched_setscheduler only to
    SCHED_OTHER, BATCH or IDLE (a real-time policy would starve every other run);
    F_SETOWN only to 0, own_pgid or the own group; F_SETOWN_EX (its target is behind a
    pointer), F_SETSIG, FIOSETOWN and SIOCSPGRP refused. Cost: a process the submission
    forked cannot signal or pin itself or a sibling by pid (EPERM, e.g. a
    multiprocessing.Pool's terminate(), pthread_setaffinity_np() on a thread of a forked
    worker); pid 0 (itself, its calling thread) always works, and so does everything in the
    first process, where import, load_model() and predict() run.

    The hand-over memory (a second line behind the ingestion's check that no process of the
    submission maps or holds it before it is reused): vmsplice, splice and tee put
    references to a buffer's pages in a pipe, where no map or descriptor shows them, and
    io_uring's registered buffers pin them the same way; all refused (io_uring as ENOSYS,
    which libraries read as "not on this kernel"). pidfd_getfd, process_madvise and setns
    act on another process (a pidfd from pidfd_open, which stays allowed: asyncio waits on
    children with it): refused.

    ``own_pgid`` None: the caller is in a pid namespace of its own, where its group's leader
    (outside) has no number; every pid it can name there is the submission's own (its init
    and its processes), so no target rule applies, only the policy rules (no real-time
    scheduling, no higher priority) and the refusals below.

    ``network`` False (no --run-network, and every sandboxed install step): ``socket()`` of
    the internet and packet families (AF_INET, AF_INET6, AF_PACKET) refused with EACCES, as
    Landlock refuses TCP. Where neither a network namespace nor Landlock ABI >= 4 is lent
    (a Codabench worker on an older kernel), this is what keeps TCP and UDP in; with them,
    a second line. Unix sockets stay (socketpair, multiprocessing, asyncio): a socket file
    is reached only where a mount namespace or file modes let the path be seen.

    ``modes`` False (the child that stays the evaluator's user with no mount namespace): the
    chmod family a no-op, chown and xattr writes refused (MODES_NOOP, MODES_REFUSED).
    """
    LD, JEQ, JGE, AND, RET = 0x20, 0x15, 0x35, 0x54, 0x06
    ALLOW, DENY = 0x7FFF0000, 0x00050000 | errno.EPERM
    anyone = own_pgid is None
    own, neg = (0, 0) if anyone else (own_pgid & 0xFFFFFFFF, -own_pgid & 0xFFFFFFFF)

    def arg(i: int, high: bool = False):  # seccomp_data.args[i], one 32-bit half (LE)
        return (LD, None, None, 16 + 8 * i + 4 * high)

    def only(*values, then="allow"):  # the loaded value must be one of values
        return [(JEQ, then, None, v) for v in values] + [(JEQ, "deny", "deny", 0)]

    def target(*values, then="allow"):  # a pid argument: one of values, or any in our pid ns
        return [(JEQ, then, then, 0)] if anyone else only(*values, then=then)

    prog = [(LD, None, None, 4), (JEQ, None, "deny_all", SYS["audit_arch"]), (LD, None, None, 0)]
    if SYS["audit_arch"] == 0xC000003E:
        prog.append((JGE, "deny", None, 0x40000000))  # the x32 ABI's syscall numbers
    blocks = {"signal": ("kill", "rt_sigqueueinfo"), "thread": ("tgkill", "rt_tgsigqueueinfo"),
              "self": ("sched_setaffinity", "sched_setparam", "migrate_pages", "move_pages",
                       "process_vm_readv", "process_vm_writev"),
              "sched": ("sched_setscheduler",), "prio": ("setpriority",),
              "ioprio": ("ioprio_set",), "prlimit": ("prlimit64",), "fcntl": ("fcntl",),
              "ioctl": ("ioctl",), **({} if network else {"socket": ("socket",)})}
    # the frequent calls (ioctl, fcntl) first: every other system call pays the whole list
    for label in ("ioctl", "fcntl", *[b for b in blocks if b not in ("ioctl", "fcntl")]):
        prog += [(JEQ, label, None, SYS[name]) for name in blocks[label]]
    prog += [(JEQ, "deny", None, SYS[name]) for name in REFUSED]
    prog += [(JEQ, "nosys", None, SYS[name]) for name in NOT_THERE]
    if not modes:  # aarch64 has no chmod, chown, lchown (only the *at calls)
        prog += [(JEQ, "noop", None, SYS[name]) for name in MODES_NOOP if name in SYS]
        prog += [(JEQ, "deny", None, SYS[name]) for name in MODES_REFUSED if name in SYS]
    prog.append((RET, None, None, ALLOW))
    prog += [("ioctl",), arg(1), (JEQ, "deny", None, FIOSETOWN), (JEQ, "deny", None, SIOCSPGRP),
             (RET, None, None, ALLOW)]
    prog += [("fcntl",), arg(1), (JEQ, "deny", None, F_SETSIG), (JEQ, "deny", None, F_SETOWN_EX),
             (JEQ, None, "allow", F_SETOWN), arg(2), *target(0, own, neg)]
    prog += [("signal",), arg(0), *target(0, own, neg)]
    prog += [("thread",), arg(0), *target(own)]
    prog += [("self",), arg(0), *target(0, own)]
    prog += [("sched",), arg(0), *target(0, own, then="policy"),
             ("policy",), arg(1), (AND, None, None, ~SCHED_RESET_ON_FORK),
             *only(SCHED_OTHER, SCHED_BATCH, SCHED_IDLE)]
    prog += [("prio",), arg(2), (JGE, "deny", None, 0x80000000),  # negative nice: higher
             arg(0), *only(PRIO_PROCESS, PRIO_PGRP, then="who")]
    prog += [("ioprio",), arg(2), (AND, None, None, IOPRIO_CLASS_MASK),
             (JEQ, "deny", None, IOPRIO_CLASS_RT), arg(0),
             *only(IOPRIO_WHO_PROCESS, IOPRIO_WHO_PGRP, then="who")]
    prog += [("who",), arg(1), *target(0, own)]
    prog += [("prlimit",), arg(0), *([(JEQ, "allow", "allow", 0)] if anyone else []),
             (JEQ, "allow", None, 0), (JEQ, "allow", None, own),
             arg(2), (JEQ, None, "deny", 0), arg(2, high=True), *only(0)]  # new limit NULL: a read
    if not network:
        prog += [("socket",), arg(0), (JEQ, "eacces", None, AF_INET),
                 (JEQ, "eacces", None, AF_INET6), (JEQ, "eacces", None, AF_PACKET),
                 (RET, None, None, ALLOW), ("eacces",), (RET, None, None, 0x00050000 | errno.EACCES)]
    prog += [("allow",), (RET, None, None, ALLOW), ("deny",), (RET, None, None, DENY),
             ("nosys",), (RET, None, None, 0x00050000 | errno.ENOSYS),
             ("noop",), (RET, None, None, 0x00050000),  # errno 0: returns 0, nothing done
             ("deny_all",), (RET, None, None, 0x00050000 | errno.ENOSYS)]
    return _assemble(prog)


def _assemble(prog) -> bytes:
    """Labels resolved into the 8-bit relative jumps of classic BPF."""
    labels, code = {}, []
    for ins in prog:
        if len(ins) == 1:
            labels[ins[0]] = len(code)
        else:
            code.append(ins)
    out = b""
    for i, (op, jt, jf, k) in enumerate(code):
        jt = 0 if jt is None else labels[jt] - i - 1
        jf = 0 if jf is None else labels[jf] - i - 1
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise ValueError("seccomp program too long for 8-bit jumps")
        out += struct.pack("=HBBI", op, jt, jf, k & 0xFFFFFFFF)
    return out


class _Prepared:
    """Everything the preexec needs, built in the parent: the rules (a /proc and folder walk)
    and their buffers; after fork only syscalls and the small seccomp program are left."""

    def __init__(self, policy: Policy, seccomp: bool):
        self.abi = policy.abi
        self.rules = policy.rules() if policy.abi else []
        handled_net = (NET_BIND_TCP | NET_CONNECT_TCP) if policy.abi >= 4 and not policy.network else 0
        scoped = (SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET) if policy.abi >= 6 else 0
        fields = [policy.handled_fs()] + ([handled_net] if policy.abi >= 4 else []) + \
            ([scoped] if policy.abi >= 6 else [])
        self.ruleset_attr = ctypes.create_string_buffer(struct.pack(f"={len(fields)}Q", *fields),
                                                       8 * len(fields))
        self.rule_bufs = [(path.encode(), ctypes.create_string_buffer(12)) for path, _ in self.rules]
        self.accesses = [acc for _, acc in self.rules]
        self.seccomp = seccomp and SYS is not None
        self.network = policy.network
        self.prog = None
        self.fprog = ctypes.create_string_buffer(16)
        self.fsize = 0  # RLIMIT_FSIZE in bytes (0: unlimited)
        self.modes = True  # False: chmod a no-op, chown refused (seccomp_program)

    def apply(self) -> None:
        """In the forked child, before exec: the child is its own group leader already."""
        libc = _libc
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            os._exit(125)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if self.fsize:  # a write past it fails (EFBIG) rather than killing the process
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.fsize, self.fsize))
            libc.signal(SIGXFSZ, ctypes.c_void_p(1))  # SIG_IGN, kept across exec
        if self.abi:
            self._landlock()
        if self.seccomp:
            # 0: our group's leader is outside our pid namespace (layers.py): any pid we can
            # name there is the submission's own
            pgid = os.getpgid(0)
            prog = ctypes.create_string_buffer(seccomp_program(pgid or None, self.network,
                                                               self.modes))
            n = len(prog.raw) // 8
            struct.pack_into("=HxxxxxxQ", self.fprog, 0, n, ctypes.addressof(prog))
            self.prog = prog
            if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self.fprog, 0, 0) != 0:
                os.write(2, b"challenge-welding sandbox: seccomp filter refused\n")
                os._exit(125)

    def _landlock(self) -> None:
        libc = _libc
        fd = libc.syscall(SYS["landlock_create_ruleset"], self.ruleset_attr,
                          ctypes.c_size_t(len(self.ruleset_attr.raw)), ctypes.c_uint32(0))
        if fd < 0:
            os.write(2, b"challenge-welding sandbox: landlock_create_ruleset failed\n")
            os._exit(125)
        for (path, buf), access in zip(self.rule_bufs, self.accesses):
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # gone since the plan: nothing to allow
            struct.pack_into("=Qi", buf, 0, access, pfd)
            rc = libc.syscall(SYS["landlock_add_rule"], fd, RULE_PATH_BENEATH, buf, ctypes.c_uint32(0))
            os.close(pfd)
            if rc != 0:
                os.write(2, b"challenge-welding sandbox: landlock_add_rule failed for " + path + b"\n")
                os._exit(125)
        if libc.syscall(SYS["landlock_restrict_self"], fd, ctypes.c_uint32(0)) != 0:
            os.write(2, b"challenge-welding sandbox: landlock_restrict_self failed\n")
            os._exit(125)
        os.close(fd)


class Confinement:
    """A preexec_fn: own process group, the namespaces of ``plan`` (layers.py), no
    capability, then :class:`Policy` and the seccomp guard."""

    def __init__(self, policy: Policy, seccomp: bool = True, oom_adj: bool = False,
                 max_processes: int = 0, plan: "layers.Plan | None" = None,
                 user: tuple[int, int] | None = None):
        self.policy = policy
        self.plan = plan
        self.user = user  # (uid, gid) to become, or None: the evaluator's
        self.owned: list[str] = []  # folders handed to ``user`` for the step (:meth:`hand_over`)
        if plan is not None:
            plan.prepare()
            if plan.userns and user is not None:  # root without CAP_SYS_ADMIN (layers.Plan)
                plan.map_user = user
        self.env: dict = {}                  # environment variables the confined process gets
        self.max_processes = max_processes   # the fork watchdog's cap (0: none)
        self.kill_timeout = float(os.environ.get(KILL_TIMEOUT_ENV, 10))
        self.prepared = _Prepared(policy, seccomp) if sys.platform.startswith("linux") else None
        self.oom_adj = oom_adj
        self.after_step = None  # called by :meth:`reclaim` (Sandbox.restore_modes)

    def __call__(self) -> None:
        os.setsid()  # own group (and session): killpg ends them all; seccomp keeps them in it
        if self.oom_adj:
            try:  # if memory runs out, the kernel kills the submission, never the evaluator
                with open("/proc/self/oom_score_adj", "w") as fh:
                    fh.write("1000")
            except OSError:
                pass
        if self.prepared is not None:
            try:
                if self.plan is not None:
                    self.plan.enter()  # with a pid namespace, only its pid 1 returns from here
                layers.drop_capabilities(self.user)
                self.prepared.apply()
            except Exception as exc:  # one line in the step's log, never run unconfined
                os.write(2, f"challenge-welding sandbox: {type(exc).__name__}: {exc}\n".encode())
                os._exit(125)

    def hand_over(self, write, read) -> None:
        """Before the step, as a user of its own: the folders it writes become its (the whole
        tree), our per-run copies it reads are made readable to others, and the folders
        holding them traversable by its uid alone (an ACL entry: not listable, and closed to
        another run's uid, which would otherwise reach this run's scratch and copies by the
        names /tmp lists; "others" may traverse only where the file system keeps no ACL).
        Nothing else of ours changes hands."""
        if self.user is None:
            return
        self.owned = [str(f) for f in write if f and os.path.isdir(f)]
        for folder in self.owned:
            _walk(folder, self._give)
        work = {os.path.dirname(os.path.realpath(f)) for f in self.owned}
        for folder in work:
            st = os.stat(folder)
            if st.st_uid == os.geteuid() and not st.st_mode & 0o001 \
                    and not layers.allow(folder, self.user[0], 0o1):
                os.chmod(folder, st.st_mode & 0o7777 | 0o001)
        for path in read:  # only our own copies, in the run's work folder
            if path and any(layers._under(os.path.realpath(path), w) for w in work):
                _walk(path, _readable)

    def _give(self, path: str, is_dir: bool) -> None:
        """Folders, and files with one link only: a file with more is shared with another
        path, and uv installs an environment's files as hard links of its cache, which every
        later run trusts (given to it, a source build appended to the cache's numpy through
        the environment). Those stay ours, read-only to it: it may replace them in its
        folders (a new file), never write them."""
        if is_dir or os.stat(path, follow_symlinks=False).st_nlink == 1:
            os.chown(path, *self.user, follow_symlinks=False)

    def reclaim(self) -> None:
        """After the step (every process of it dead): what :meth:`hand_over` gave is ours
        again, set-id bits cleared, readable (a later step, the child, reads it), so that no
        file of the sandbox's user outlives the step in a folder we keep or trust."""
        me = (os.geteuid(), os.getegid())
        for folder in self.owned:
            for path in _tree(folder):
                try:
                    if os.stat(path, follow_symlinks=False).st_uid != self.user[0]:
                        continue  # another's (a link to a file it could write): not touched
                    os.chown(path, *me, follow_symlinks=False)
                    if not os.path.islink(path):
                        _readable(path, os.path.isdir(path), clear=0o6000)
                except OSError:
                    pass  # gone (a temporary file): nothing left to own
        self.owned = []
        if self.after_step is not None:
            self.after_step()

    def describe(self) -> dict:
        out = self.policy.describe()
        out["user"] = (f"uid {self.user[0]}, gid {self.user[1]}, no groups" if self.user
                       else "the evaluator's")
        out["namespaces"] = self.plan.names() if self.plan is not None else []
        out["capabilities"] = "none (bounding, ambient, effective, permitted, inheritable " \
            "emptied)" if os.geteuid() == 0 or (self.plan and self.plan.userns) else \
            "none held (not root; bounding set kept, inert under no_new_privs)"
        out["seccomp"] = ("setsid/setpgid refused; signals, SIGIO owners, scheduling, priorities, "
                          "limits and process_vm_* on any process outside the submission's "
                          "group refused; splice/vmsplice/tee/io_uring refused") \
            if self.prepared and self.prepared.seccomp \
            else None
        if out["seccomp"] and not self.prepared.modes:
            out["seccomp"] += "; chmod a no-op, chown and xattr writes refused"
        out["rlimits"] = {"core": 0}
        if self.prepared is not None and self.prepared.fsize:
            out["rlimits"]["fsize"] = self.prepared.fsize
        if self.plan is not None and self.plan.tmpfs:
            out["scratch"] = {"tmpfs_bytes": max(self.plan.tmpfs.values())}
        return out


@dataclass
class Sandbox:
    """The run's sandbox settings; makes the install's and the child's confinements."""

    holes: list                 # input_data, reference_data, output, the evaluator's files
    evaluator_read: list        # files the child must read in a hole (child.py)
    install_network: bool = True
    run_network: bool = False
    max_processes: int = IngestOptions.max_processes  # its one home: options.py
    abi: int = field(default_factory=usable_abi)
    kernel: int = field(default_factory=kernel_abi)
    installed: dict | None = None   # what the last install step ran under
    namespaces: dict = field(default_factory=layers.probe)  # what the kernel lends (layers.py)
    unsafe: bool = False        # --unsafe-unconfined: run even where no layer confines files
    # a user of its own (:meth:`choose_user`): what it must read (the interpreter, the
    # environments' cache, uv, child.py) and what it must never reach (input, reference, output)
    reach: list = field(default_factory=list)
    sealed: list = field(default_factory=list)
    user: tuple | None = None
    user_files: bool = False    # its permissions alone keep it off our folders (no mount ns)
    denied: list = field(default_factory=list)  # ACL entries made for the run (layers.deny)
    modes: dict = field(default_factory=dict)   # {path: (mode, uid, gid)} of ``sealed`` at start
    modes_restored: list = field(default_factory=list)  # paths whose modes a step changed
    litter: list = field(default_factory=list)  # what its user left in /tmp... (removed)
    _chosen: bool = False
    _unlease: "weakref.finalize | None" = field(default=None, repr=False, compare=False)

    @classmethod
    def for_run(cls, input_data: Path, output: Path, isolation: bool, install_network: bool,
                run_network: bool, max_processes: int, evaluator_read,
                reach=()) -> "Sandbox":
        """``reach``: what participant code must read besides ``evaluator_read`` (the
        interpreter, the environments' cache, uv): where no mount namespace is lent, a user of
        its own is used only if the kernel lets it read these and nothing of ``holes``."""
        pkg_init = challenge_welding.__file__
        holes = [str(input_data), str(Path(input_data).parent / "reference_data"), str(output)]
        sealed = list(holes)
        ours = [str(Path(pkg_init).parent), *evaluator_site_dirs()]
        if sys.prefix != sys.base_prefix:
            ours.append(sys.prefix)  # the evaluator's virtual environment
        if isolation:
            holes += ours
        else:  # --no-isolation: the child runs in our own environment; it reads (not writes) it
            evaluator_read = [*evaluator_read, *ours]
        box = cls(holes=holes, evaluator_read=list(evaluator_read),
                  install_network=install_network, run_network=run_network,
                  max_processes=max_processes, sealed=sealed,
                  reach=[str(p) for p in (*reach, *evaluator_read) if p])
        box.choose_user()
        box.modes = record_modes(sealed)
        return box

    def restore_modes(self) -> list[str]:
        """After an install step and after the run (every process of it dead): the modes and
        owners of input_data, reference_data and the output folder as they were at the start.
        An install step stays the evaluator's user on a Codabench worker and must set modes
        in the environment it builds (pip, uv), so its chmod cannot be refused there; what it
        did to our folders is undone here. The paths changed are added to ``modes_restored``."""
        changed = restore_modes(self.modes)
        self.modes_restored += [p for p in changed if p not in self.modes_restored]
        return changed

    def choose_user(self) -> None:
        """Once, before any participant code: the user it runs as (:func:`layers.sandbox_user`)
        and, without a mount namespace, whether the kernel's permission checks then confine
        its files (:func:`layers.user_confines`, which may deny it the sealed folders by an
        ACL entry for the run: :meth:`release` takes them back). Else the evaluator's user,
        the reason in the start line."""
        if self._chosen:
            return
        self._chosen = True
        mount = bool(self.namespaces.get("mount"))
        self.user, self.user_line = layers.sandbox_user(mount, bool(self.namespaces.get("userns")))
        if self.user is not None:  # a uid of its own for the run (layers.lease_uid), given
            # back by release() at the end of the run, or when this object goes (a Sandbox
            # that no run releases: an install outside a run)
            self._unlease = weakref.finalize(self, layers.unlease_uid, self.user[0])
        if self.user is None or mount:
            return
        ours = [h for h in self.holes if h not in self.sealed]
        ok, why, self.denied = (layers.user_confines(self.user, self.reach, self.sealed, ours)
                                if self.reach else (False, "no mount namespace", []))
        if not ok:
            self._unlease()
            self.user, self.user_line = None, f"same user as the evaluator (uid 0, no " \
                                              f"capability: {why})"
            return
        self.user_files = True
        if self.denied:
            gid = self.user[1]
            self.user_line = self.user_line[:-1] + f"; denied by the ACL entry g:{gid}:--- " \
                + "(taken out at the end unless another run holds it; by hand: setfacl -x " \
                + f"g:{gid} PATH): " + ", ".join(os.path.basename(p) for p, _ in self.denied) + ")"

    def disown(self, folder) -> None:
        """Every file of the sandbox's user under ``folder`` ours again (a work folder kept
        with --keep-workdir: its scratch; removed folders need nothing)."""
        if self.user is None:
            return
        layers.disallow(str(folder), self.user[0])  # hand_over's entry: the uid goes to others
        for path in _tree(folder):
            with contextlib.suppress(OSError):
                if os.stat(path, follow_symlinks=False).st_uid == self.user[0]:
                    os.chown(path, os.geteuid(), os.getegid(), follow_symlinks=False)

    def release(self) -> None:
        """At the end of the run: the ACL entries :meth:`choose_user` made taken back where no
        other run relies on them (:func:`layers.release`), and the leased uid given back:
        every process still under it killed (:func:`layers.unlease_uid`)."""
        layers.release(self.denied, self.user[1] if self.user else layers.SANDBOX_GID)
        self.denied = []
        if self._unlease is not None:
            self._unlease()  # once only (a finalizer runs at most once)
        if self.user_files and self.user is not None:  # no mount namespace: /tmp was shared
            self.litter += layers.remove_litter(self.user[0])

    @classmethod
    def default(cls) -> "Sandbox":
        """Only the evaluator's own files out of reach (an install outside a run)."""
        holes = [str(Path(challenge_welding.__file__).parent), *evaluator_site_dirs()]
        if sys.prefix != sys.base_prefix:
            holes.append(sys.prefix)
        return cls(holes=holes, evaluator_read=[])

    def install(self, write, read, network: bool | None = None) -> Confinement:
        """For the install: ``write`` (the environment being built, caches, temp), ``read``
        (the submission, wheelhouse, uv...). Network unless --no-network or ``network`` False."""
        net = self.install_network if network is None else network and self.install_network
        pol = Policy(read=[*SYSTEM_READ, *base_prefixes(), *read], write=list(write),
                     holes=self.holes, network=net, abi=self.abi)
        self.choose_user()
        conf = Confinement(pol, max_processes=self.max_processes,
                           plan=self._plan(pol, network=net), user=self.user)
        conf.hand_over(write, read)  # the caller reclaims them after the step
        conf.after_step = self.restore_modes
        self.installed = conf.describe()
        return conf

    def run(self, env_prefix: str, read, scratch, scratch_dirs=()) -> Confinement:
        """For the child: read its environment, the submission and child.py; write scratch
        (``scratch_dirs``: folders made in each, e.g. its tmp/), bounded (:func:`scratch_bytes`).
        As a user of its own (:func:`layers.sandbox_user`): the scratch folders become its,
        our per-run copies it reads (the submission, its site folder) readable by it."""
        pol = Policy(read=[*SYSTEM_READ, *base_prefixes(env_prefix), env_prefix, *read,
                           *self.evaluator_read],
                     write=list(scratch), holes=self.holes, network=self.run_network, abi=self.abi)
        plan = self._plan(pol, network=self.run_network)
        self.choose_user()
        bound = scratch_bytes()
        if plan is not None:  # each scratch folder a tmpfs of its own, of a bounded size
            plan.tmpfs = dict.fromkeys(scratch, bound)
            plan.tmpfs_owner, plan.tmpfs_dirs = self.user, tuple(scratch_dirs)
        conf = Confinement(pol, oom_adj=True, max_processes=self.max_processes, plan=plan,
                           user=self.user)
        conf.hand_over(scratch, read)  # removed with the run's work folder, by us
        if self.user is not None:  # its uid's alone (another run's uid shares its gid)
            for folder in scratch:
                if os.path.isdir(folder) and not os.path.islink(folder):
                    os.chmod(folder, 0o700)
        if conf.prepared is not None:
            conf.prepared.fsize = bound
            # the evaluator's user, no mount namespace: it owns our folders (seccomp_program)
            conf.prepared.modes = not (self.user is None and plan is None)
        return conf

    def _plan(self, pol: Policy, network: bool) -> "layers.Plan | None":
        """The namespaces the kernel lends, around ``pol``'s folders; none if it lends none.
        No network namespace where the step may use the network (an install that downloads)."""
        ns = self.namespaces
        if not ns.get("mount"):
            return None
        return layers.Plan(userns=ns["userns"], mount=True, ipc=ns["ipc"],
                           net=ns["net"] and not network, pid=ns["pid"], read=list(pol.read),
                           write=list(pol.write), holes=list(pol.holes))

    user_line: str = ""

    def files_confined(self) -> bool:
        """Whether a layer keeps the submission off our files: Landlock, a mount namespace
        (read-only tree, holes covered) or a user of its own that the kernel's permission
        checks keep off them (:meth:`choose_user`)."""
        return bool(self.abi or self.namespaces.get("mount") or self.user_files)

    def layers(self) -> dict:
        """Which layers hold, for the start line and ingestion.json's ``sandbox.layers``."""
        ns = self.namespaces
        root = os.geteuid() == 0
        self.choose_user()
        return {"user": self.user_line,
                "namespaces": [n for n in ("user", "mount", "ipc", "net", "pid")
                               if ns.get("userns" if n == "user" else n)],
                "capabilities": "none" if root or ns.get("userns") else
                                "none held (bounding set inert: no_new_privs)",
                "landlock_abi": self.abi, "seccomp": SYS is not None,
                "files_confined": self.files_confined(),
                "unsafe_unconfined": self.unsafe and not self.files_confined()}

    def layers_line(self) -> str:
        """One line: which layers hold."""
        lay = self.layers()
        ns = ", ".join(lay["namespaces"]) or "none"
        return (f"sandbox layers: user: {lay['user']}; namespaces: {ns}; capabilities: "
                f"{lay['capabilities']}; Landlock ABI {lay['landlock_abi']}"
                + ("" if lay["landlock_abi"] else " (none)")
                + f"; seccomp: {'yes' if lay['seccomp'] else 'no'}"
                + ("" if lay["files_confined"] else "; FILES NOT CONFINED"))

    def describe(self) -> dict:
        return {"landlock_abi": self.abi or None, "kernel_landlock_abi": self.kernel,
                "unsafe_unconfined": self.unsafe and not self.files_confined(),
                "abi_cap": os.environ.get(ABI_MAX_ENV) or None,
                "max_processes": self.max_processes, "layers": self.layers(),
                "network": {"install": "allowed" if self.install_network else "denied",
                            "run": "allowed" if self.run_network else "denied"}}

    def refusal(self) -> str:
        """The one line ``ingest`` stops with where nothing confines files and the organiser
        did not say --unsafe-unconfined."""
        return ("no layer confines the submission's files here (no Landlock: kernel ABI "
                f"{self.kernel}, cap {os.environ.get(ABI_MAX_ENV) or 'none'}; no mount namespace"
                f"; no separate user: {self.user_line}): it could read the reference data and "
                "write the output "
                "folder; run on a kernel with Landlock (>= 5.13) or where namespaces are lent, "
                "or pass --unsafe-unconfined to run it anyway (the results will say so)")

    def warning(self) -> str | None:
        """One loud line when the files are not confined."""
        if self.files_confined():
            return None
        return ("NO SANDBOX: this kernel has no Landlock (or it is capped off): the submission "
                "can read and write whatever this user can; only the seccomp guard, the process "
                "cap and the evaluator's file hashes protect the run")


def record_modes(folders) -> dict:
    """{path: (mode, uid, gid)} of each folder and everything beneath it (links left out:
    chmod would follow them)."""
    out = {}
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        for path in _tree(folder):
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                if not stat.S_ISLNK(st.st_mode):
                    out[path] = (st.st_mode & 0o7777, st.st_uid, st.st_gid)
    return out


def restore_modes(recorded: dict) -> list[str]:
    """Each path of :func:`record_modes` whose mode or owner differs now, set back; the
    paths changed (gone ones are skipped: the output folder's cleaning says those)."""
    changed = []
    for path, (mode, uid, gid) in recorded.items():
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode) or (st.st_mode & 0o7777, st.st_uid, st.st_gid) == \
                (mode, uid, gid):
            continue
        changed.append(path)
        with contextlib.suppress(OSError):
            if (st.st_uid, st.st_gid) != (uid, gid):
                os.chown(path, uid, gid, follow_symlinks=False)
            os.chmod(path, mode)
    return changed


def _readable(path, is_dir, clear: int = 0) -> None:
    """Readable by others (and traversable, a folder), ``clear`` bits taken off."""
    mode = os.stat(path, follow_symlinks=False).st_mode & 0o7777
    os.chmod(path, (mode & ~clear) | (0o005 if is_dir else 0o004))


def _tree(top):
    """``top`` and every path beneath it, symlinks included (as links), none followed."""
    yield str(top)
    for dirpath, dirs, files in os.walk(top):
        for name in dirs + files:
            yield os.path.join(dirpath, name)


def _walk(top, fn) -> None:
    """``fn(path, is_dir)`` on ``top`` and everything beneath it (symlinks not followed)."""
    if os.path.islink(top):
        return
    fn(str(top), os.path.isdir(top))
    for dirpath, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                fn(path, os.path.isdir(path))


def evaluator_site_dirs() -> list[str]:
    """The evaluator's interpreter's site-packages (where a .pth would run in every process)."""
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    return [d for d in dirs if d]


def base_prefixes(env_prefix: str | None = None) -> list[str]:
    """The base interpreter's prefix: ours, or the one named by ``env_prefix``/pyvenv.cfg."""
    out = [sys.base_prefix]
    if env_prefix:
        cfg = Path(env_prefix) / "pyvenv.cfg"
        try:
            for line in cfg.read_text().splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home":
                    out.append(str(Path(value.strip()).parent))
        except OSError:
            pass
    return out
