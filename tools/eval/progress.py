"""Progress bars for long phases (load, warmup, eval cells), drawn only on a terminal.

When the stream is not a TTY (piped, redirected, under ctest) nothing is drawn: no carriage
returns, no ANSI codes, so logs stay clean. The bar redraws at most every 0.1 s.
"""
import sys
import time


class Progress:
    def __init__(self, stream=None, enabled=None, width=28):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.width = width
        self._last = 0.0
        self._shown = False
        self._t0 = time.perf_counter()

    def update(self, label, done=None, total=None, force=False):
        """Redraw one line: '[####......] label done/total' (or an elapsed-time counter
        when total is unknown)."""
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        if total:
            frac = max(0.0, min(1.0, (done or 0) / total))
            fill = int(round(frac * self.width))
            bar = "[" + "#" * fill + "." * (self.width - fill) + f"] {done}/{total}"
        else:
            bar = f"[{now - self._t0:6.1f} s]"
        # \x1b[K clears what a longer previous line left behind.
        self.stream.write(f"\r{bar} {label}\x1b[K")
        self.stream.flush()
        self._shown = True

    def restart_clock(self):
        self._t0 = time.perf_counter()

    def clear(self):
        """Remove the bar so a plain log line can follow."""
        if self.enabled and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

    def log(self, line):
        """A plain line (always printed, also when piped), keeping the bar below it."""
        self.clear()
        print(line, file=self.stream, flush=True)
