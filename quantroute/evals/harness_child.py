"""The program that runs INSIDE the sandbox (bubblewrap), one process per code answer. Never imported by the
grader: `sandbox.py` reads this file's text and runs it with `python -I -B -c`.

It limits itself before any answer code runs (rlimits; as root it switches to a throwaway uid first, so the
limits hold and cannot be raised again), installs an audit hook as a second layer behind the OS boundary, runs
the answer, then each test's probe program, and writes for each test the plain values of the probed operands.
It never decides pass or fail: the expected values are not here (see `probes.py`)."""

import json
import os
import resource
import sys


def _limit(cfg):
    for res, value in ((resource.RLIMIT_CPU, cfg["cpu_s"]), (resource.RLIMIT_AS, cfg["mem"]),
                       (resource.RLIMIT_NOFILE, 64), (resource.RLIMIT_FSIZE, cfg["fsize"]),
                       (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(res, (value, value))
    if os.getuid() == 0:
        # Root ignores RLIMIT_NPROC and may raise every hard limit: become a uid no other process has (the
        # parent picks a fresh one per run), so the process limit counts only this answer's processes.
        resource.setrlimit(resource.RLIMIT_NPROC, (cfg["nproc"], cfg["nproc"]))
        os.setgroups([])
        os.setgid(cfg["uid"])
        os.setuid(cfg["uid"])
        if os.getuid() == 0 or os.geteuid() == 0:
            raise SystemExit("sandbox: could not leave root")


def _encoder(depth_limit=64, budget=200_000):
    # Bound here, before the answer runs: an answer that rebinds builtins later changes nothing below.
    _type, _len, _repr, _list, _str = type, len, repr, list, str
    plain = (_type(None), bool, int, float, str)
    tags: dict[type, str] = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}
    left = [budget]

    def encode(v, depth=0):
        left[0] -= 1
        t = _type(v)
        if depth > depth_limit or left[0] < 0:
            return {"opaque": "too large"}
        if t in plain:
            if t is int and v.bit_length() > 4096:
                return {"opaque": "huge int"}
            if t is str and _len(v) > 100_000:
                return {"opaque": "huge str"}
            return v
        if t is bytes:
            return {"bytes": v.hex()}
        if t in tags:
            return {tags[t]: [encode(x, depth + 1) for x in _list(v)]}
        if t is dict:
            return {"dict": [[encode(k, depth + 1), encode(x, depth + 1)] for k, x in _list(v.items())]}
        return {"opaque": _str(t.__name__)[:60]}
    return encode


BLOCKED_MODULES = frozenset({
    "socket", "_socket", "ssl", "_ssl", "ctypes", "_ctypes", "subprocess", "_posixsubprocess", "multiprocessing",
    "_multiprocessing", "asyncio", "select", "selectors", "mmap", "pty", "fcntl", "resource", "signal",
    "_testcapi", "_xxsubinterpreters"})
BLOCKED_EVENTS = frozenset({
    "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname",
    "socket.sendto", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.kill",
    "os.killpg", "subprocess.Popen", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata",
    "sys._current_frames", "sys._current_exceptions", "sys.setprofile", "sys.settrace", "os.setuid", "os.chroot",
    "pty.spawn", "webbrowser.open", "shutil.chown", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "sys.addaudithook", "code.__new__", "function.__new__", "os.setns", "os.unshare"})
# Reading these attributes hands out frames and code objects, the short way from an answer back to the harness.
# (sys._getframe stays allowed: namedtuple, dataclasses and enum need it. A frame walk reaches only what the
# harness holds, and the harness holds nothing that decides a score: the expected values are in the grader.)
BLOCKED_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "gi_code", "cr_code", "ag_code",
                           "f_code", "f_back", "f_globals", "f_locals", "f_builtins"})
# Position of the dir_fd arguments of each path event (a path relative to a directory fd escapes a path check).
PATH_EVENTS = {
    "os.remove": (1,), "os.rmdir": (1,), "os.mkdir": (2,), "os.rename": (2, 3), "os.chmod": (2,), "os.chown": (3,),
    "os.symlink": (2,), "os.link": (2, 3), "os.utime": (3,), "os.mkfifo": (2,), "os.mknod": (3,),
    "os.truncate": (), "shutil.rmtree": (1,), "shutil.copyfile": (), "shutil.copytree": (), "shutil.move": (),
    "os.chdir": (), "os.chflags": (), "os.setxattr": (), "os.removexattr": ()}
READ_EVENTS = frozenset({"os.listdir", "os.scandir", "os.listxattr"})
READ_ROOTS = ("/usr/", "/lib", "/bin/", "/dev/null", "/dev/urandom")


def _hook(root, prefix):
    """The audit hook: everything it uses is bound here, so an answer that rebinds builtins or this module's
    globals afterwards cannot switch it off (there is no flag to flip)."""
    blocked_modules, blocked_events, blocked_attrs = BLOCKED_MODULES, BLOCKED_EVENTS, BLOCKED_ATTRS
    path_events, read_events = dict(PATH_EVENTS), READ_EVENTS
    readable = READ_ROOTS + ((prefix.rstrip("/") + "/"),)
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    realpath, fsdecode, isdir, pathlike = os.path.realpath, os.fsdecode, os.path.isdir, (str, bytes, os.PathLike)
    _isinstance, _any, _len, _int = isinstance, any, len, int
    deny, no_import = PermissionError, ImportError

    def full(p):
        return realpath(fsdecode(p))

    def inside(p):
        p = full(p)
        return p == root or p.startswith(root + "/")

    def hook(event, args):
        if event == "import" and (args[0] in blocked_modules or args[0].split(".")[0] in blocked_modules):
            raise no_import(f"sandbox: import of {args[0]} is not allowed")
        if event in blocked_events:
            raise deny(f"sandbox: {event} is not allowed")
        if event == "object.__getattr__" and args[1] in blocked_attrs:
            raise deny(f"sandbox: reading .{args[1]} is not allowed")
        if event == "open":
            path, mode, flags = args
            if _isinstance(path, _int):
                return
            writing = (mode is not None and _any(c in mode for c in "wax+")) or (mode is None and flags & write_flags)
            if writing and not inside(path):
                raise deny(f"sandbox: writing {path!r} is not allowed")
            # A directory fd outside the temp dir would let later calls with dir_fd= write relative to it.
            if not inside(path) and (isdir(full(path)) or not full(path).startswith(readable)):
                raise deny(f"sandbox: opening {path!r} is not allowed")
        elif event in read_events:
            if args and _isinstance(args[0], pathlike) and not inside(args[0]) \
                    and not full(args[0]).startswith(readable):
                raise deny(f"sandbox: {event} of {args[0]!r} is not allowed")
        elif event in path_events:
            for i in path_events[event]:
                if i < _len(args) and args[i] is not None and args[i] != -1:
                    raise deny(f"sandbox: {event} relative to a directory fd is not allowed")
            for a in args[:2]:
                if _isinstance(a, pathlike) and not inside(a):
                    raise deny(f"sandbox: {event} outside the sandbox is not allowed")
    return hook


def main():
    cfg = json.loads(sys.stdin.read())
    _limit(cfg)
    nonce = cfg["nonce"]
    write, dumps, encode = os.write, json.dumps, _encoder()
    root = os.path.realpath(os.getcwd())

    def emit(obj):
        write(1, ("\n" + nonce + dumps(obj) + "\n").encode())

    records = []

    def probe(index, *values):
        records.append([index, [encode(v) for v in values]])

    if cfg["audit_hook"]:
        sys.addaudithook(_hook(root, cfg["prefix"]))
    ns: dict[str, object] = {"__name__": "__answer__"}
    try:
        exec(compile(cfg["code"], "<answer>", "exec"), ns)
        if not callable(ns.get(cfg["entry_point"])):
            raise NameError(f"the answer does not define {cfg['entry_point']}()")
    except BaseException as e:  # noqa: BLE001 - hostile code: whatever it raises (SystemExit too) is its verdict
        emit({"load_error": f"{type(e).__name__}: {e}"[:500]})
        return
    for i, source in enumerate(cfg["tests"]):
        records.clear()
        ns["__probe__"] = probe
        error = None
        try:
            exec(compile(source, f"<test {i}>", "exec"), ns)
        except BaseException as e:  # noqa: BLE001 - whatever a test raises is that test's verdict
            error = f"{type(e).__name__}: {e}"[:300]
        emit({"test": i, "records": list(records), "error": error})


if __name__ == "__main__":
    main()
