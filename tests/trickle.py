"""A webhook receiver that never finishes answering: after the status line it sends one
header line every ``every`` seconds, so no read ever waits long enough to time out."""

from __future__ import annotations

import socket
import threading


class TricklingServer:
    def __init__(self, every: float = 2.0):
        self.every = every
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.accepted = 0
        self.closed_by_client = 0
        self.stopping = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        self.sock.settimeout(0.2)
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            threading.Thread(target=self.trickle, args=(conn,), daemon=True).start()

    def trickle(self, conn):
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                n = 0
                while not self.stopping.wait(self.every):
                    n += 1
                    conn.sendall(f"X-Still-Here-{n}: yes\r\n".encode())
            except OSError:
                self.closed_by_client += 1

    def stop(self):
        self.stopping.set()
        self.sock.close()
