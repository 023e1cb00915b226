"""Runs model-written Python (the is_prime turn) in a locked-down subprocess.

Isolation, strongest available first: `python3 -I` (no site, no env, no cwd on sys.path),
an empty environment, a fresh temp dir as cwd, resource limits (CPU seconds, address space,
file size, no core dumps), a wall-clock timeout that kills the whole process group, and no
network via `unshare -rn` (a new user + network namespace) when the kernel allows it.
"""
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S | re.I)


def extract_code(text):
    """The first fenced code block that defines is_prime, else the first block, else the
    text from `def is_prime` on (models sometimes forget the fence). None if no code."""
    blocks = _FENCE.findall(text or "")
    for b in blocks:
        if "def is_prime" in b:
            return b
    if blocks:
        return blocks[0]
    i = (text or "").find("def is_prime")
    return text[i:] if i >= 0 else None


_NET_CACHE = {}


def _netns_prefix():
    # Probe once: unshare needs unprivileged user namespaces (absent in some containers).
    if "p" not in _NET_CACHE:
        p = []
        exe = shutil.which("unshare")
        if exe:
            try:
                ok = subprocess.run([exe, "-rn", "true"], capture_output=True, timeout=5).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
            if ok:
                p = [exe, "-rn"]
        _NET_CACHE["p"] = p
    return _NET_CACHE["p"]


def python_exe():
    """A real interpreter, not a PATH shim (pyenv shims are shell scripts that add their own
    environment variables)."""
    return "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def _limits(cpu_s):
    def apply():
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def run_snippet(code, timeout_s=5.0):
    """Runs `code`; returns {status: pass|fail|timeout|no_code, reason, returncode,
    asserts, network_isolated}. pass = exit status 0 (every assert held)."""
    if not code or not code.strip():
        return {"status": "no_code", "reason": "no code block in the answer", "returncode": None,
                "asserts": 0, "network_isolated": None}
    prefix = _netns_prefix()
    asserts = len(re.findall(r"^\s*assert\b", code, re.M))
    with tempfile.TemporaryDirectory(prefix="ds4eval-") as d:
        path = os.path.join(d, "snippet.py")
        with open(path, "w") as f:
            f.write(code)
        cmd = prefix + [python_exe(), "-I", path]
        proc = subprocess.Popen(cmd, cwd=d, env={}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=_limits(int(timeout_s) + 1))
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"status": "timeout", "reason": f"no exit within {timeout_s:g} s (killed)",
                    "returncode": None, "asserts": asserts, "network_isolated": bool(prefix)}
    rc = proc.returncode
    if rc == 0:
        return {"status": "pass", "reason": f"exit 0 with {asserts} assert(s)", "returncode": 0,
                "asserts": asserts, "network_isolated": bool(prefix)}
    last = (err.strip().splitlines() or [f"exit status {rc}"])[-1][:300]
    if rc == -signal.SIGXCPU or rc == -signal.SIGKILL:
        return {"status": "timeout", "reason": f"CPU limit hit ({last})", "returncode": rc,
                "asserts": asserts, "network_isolated": bool(prefix)}
    return {"status": "fail", "reason": last, "returncode": rc, "asserts": asserts,
            "network_isolated": bool(prefix)}


def grade_is_prime(answer, timeout_s=5.0, want_asserts=5):
    """The turn-3 task: a runnable is_prime with `want_asserts` asserts. Runs the extracted
    code; a clean exit only passes when the code defines is_prime and has enough asserts."""
    code = extract_code(answer)
    r = run_snippet(code, timeout_s)
    r["ran_ok"] = r["status"] == "pass"
    if r["status"] == "pass":
        if not re.search(r"^\s*def is_prime\s*\(", code, re.M):
            r.update(status="fail", reason="ran, but the code defines no is_prime")
        elif r["asserts"] < want_asserts:
            r.update(status="fail", reason=f"ran, but only {r['asserts']} assert(s) ({want_asserts} asked)")
    return r
