"""manage.py twin_exporter [--listen 127.0.0.1:8001]

The simulated cluster's exporters for a real Prometheus to scrape (bin/demo starts both when
Prometheus is installed): GET /metrics answers ``TwinGateway.exporter_page()`` as it is at
that moment (dcgm-exporter's DCGM series and the kube-state-metrics series brickadmin reads).
SIGTERM/SIGINT stop it."""

from __future__ import annotations

import signal
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from brickadmin.cluster.twin import TwinGateway


class Command(BaseCommand):
    help = "Serve the simulated cluster's DCGM and kube-state-metrics series for Prometheus to scrape."

    def add_arguments(self, parser):
        parser.add_argument("--listen", default="127.0.0.1:8001", help="host:port")

    def handle(self, *args, listen="127.0.0.1:8001", **opts):
        host, _, port = listen.rpartition(":")
        if not port.isdigit():
            raise CommandError(f"--listen wants host:port, not {listen!r}")

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404)
                    return
                close_old_connections()
                body = TwinGateway().exporter_page().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = HTTPServer((host or "127.0.0.1", int(port)), Handler)  # one scrape at a time: one DB connection

        def stop(signum, frame):
            threading.Thread(target=server.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.stdout.write(f"serving the simulated cluster's exporters at http://{host}:{port}/metrics")
        server.serve_forever()
        server.server_close()
