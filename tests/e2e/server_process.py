"""Starting `strictly serve` for the end-to-end scripts beside this file: a free port, and
waiting until the server answers /health. Standard library only."""
import socket
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base, proc, timeout=60):
    """Waits for `base`/health to answer 200; exits if `proc` (None: a server not ours) ends
    first or `timeout` seconds pass."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the server exited early with status {proc.returncode}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the server did not become healthy in time")
