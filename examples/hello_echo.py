"""Start an embedded platform, deploy the built-in echo function, invoke it cold and warm.

    python examples/hello_echo.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from faasrl.config import Settings
from faasrl.embedded import EmbeddedPlatform

ECHO = Path(__file__).resolve().parents[1] / "functions" / "echo"


def main() -> None:
    console = Console()
    with tempfile.TemporaryDirectory() as state:
        with console.status("starting the platform (embedded Redis, gateway, invoker)"):
            platform = EmbeddedPlatform(Settings(state_dir=Path(state), port=0)).start()
        try:
            with platform.client() as client:
                console.print(f"platform up at {platform.url}, Redis at {platform.redis_url}")
                client.deploy(ECHO)
                table = Table("invocation", "start", "client ms", "queue ms", "init ms",
                              "run ms", "billed ms", "container pid")
                for i in range(1, 6):
                    t0 = time.perf_counter()
                    rec = client.invoke("echo", {"n": i})
                    took = (time.perf_counter() - t0) * 1e3
                    assert rec["status"] == "success", rec
                    table.add_row(str(i), "cold" if rec["cold"] else "warm", f"{took:.2f}",
                                  f"{rec['queue_s'] * 1e3:.2f}", f"{rec['init_s'] * 1e3:.2f}",
                                  f"{rec['run_s'] * 1e3:.3f}", str(rec["billed_ms"]),
                                  str(rec["result"]["pid"]))
                console.print(table)
        finally:
            with console.status("stopping: containers, gateway, Redis"):
                platform.stop()
    console.print("done: the first invocation started a container, the rest reused it warm.")


if __name__ == "__main__":
    main()
