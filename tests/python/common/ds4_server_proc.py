"""Starting and stopping a ds4server process for the pytest suites (tests/python/server,
tests/python/persist). A server on --port 0 reports its port in the "listening on" log line,
and its stderr must be drained for its whole life so the pipe never blocks it; that logic
lives here once. Suites put this folder on sys.path (it is no test folder of its own)."""
import re
import signal
import subprocess
import threading
import time

_LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")


class ServerStartError(RuntimeError):
    pass


class ServerProcess:
    """`cmd` started with stderr collected in `lines`; waits up to `start_s` seconds for the port."""

    def __init__(self, cmd, start_s, stdout=subprocess.DEVNULL):
        self.proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.port = None
        deadline = time.time() + start_s
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            m = _LISTENING.search(line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise ServerStartError(f"{cmd[0]} did not start:\n" + "".join(self.lines))
        threading.Thread(target=self._drain, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _drain(self):
        for line in self.proc.stderr:
            self.lines.append(line)

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, wait_s=20):
        """Sends `sig` (if still running), kills after `wait_s` seconds; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode


def server_flags(pairs):
    """`--server-arg KEY=VALUE` values -> ds4server flags ["--KEY", "VALUE", ...]; raises
    ValueError naming the first value that is not KEY=VALUE (benches report it via argparse)."""
    flags = []
    for kv in pairs:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise ValueError(f"--server-arg: '{kv}' is not KEY=VALUE")
        flags += ["--" + k, v]
    return flags
