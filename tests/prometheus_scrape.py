"""A real Prometheus scraping a metrics page this process serves: the one way the DCGM tests
and benchmarks start one. The page is whatever ``body()`` returns at each scrape."""

from __future__ import annotations

import http.server
import socket
import subprocess
import threading
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_metrics(body) -> http.server.ThreadingHTTPServer:
    """An exporter on a free loopback port answering every GET with ``body()`` (str or bytes)."""

    class Exporter(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            data = body()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(data.encode() if isinstance(data, str) else data)

        def log_message(self, *args):
            pass

    exporter = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Exporter)
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    return exporter


def start_prometheus(binary: str, tmp: Path, exporter, rules: Path | None = None) -> tuple[subprocess.Popen, str]:
    """Prometheus scraping ``exporter`` every second (its labels kept), data under ``tmp``;
    with ``rules``, a rule file it evaluates every second."""
    port = free_port()
    rule_files = f"rule_files: ['{rules}']\n" if rules else ""
    (tmp / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n" + rule_files + "scrape_configs:\n"
        "- job_name: dcgm\n  honor_labels: true\n"
        f"  static_configs: [{{targets: ['127.0.0.1:{exporter.server_address[1]}']}}]\n"
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, f"http://127.0.0.1:{port}"
