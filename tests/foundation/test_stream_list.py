"""The real gateway's streaming list falls back to pages: against an API server that refuses
``sendInitialEvents`` (older than v1.27, or the WatchList gate off), and when the server cuts
the stream before the initial-events-end bookmark (it closes a watch whose reader falls
behind during heavy churn). The lab's v1.34 API server streams (tests/lab/test_watch.py);
these two servers cannot be had here, so a small HTTP server answers as they would."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from brickadmin.cluster.kube import KubeGateway

NODES = [{"metadata": {"name": f"n{i}", "resourceVersion": str(10 + i)}, "spec": {}, "status": {}} for i in range(3)]


class OldServer(BaseHTTPRequestHandler):
    mode = "refuse"  # or "cut"
    seen: list

    def log_message(self, *a):
        pass

    def _json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.seen.append(q)
        if url.path != "/api/v1/nodes":
            return self._json(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        if q.get("watch") == "1":
            if self.mode == "refuse":
                return self._json(
                    422,
                    {
                        "kind": "Status",
                        "status": "Failure",
                        "reason": "Invalid",
                        "code": 422,
                        "message": "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch",
                    },
                )
            # "cut": two objects of three, then the connection closes without the bookmark
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            for n in NODES[:2]:
                self.wfile.write(
                    json.dumps({"type": "ADDED", "object": {"kind": "Node", "apiVersion": "v1", **n}}).encode() + b"\n"
                )
            self.close_connection = True
            return None
        # the paged list: one object per page
        start = int(q.get("continue") or 0)
        meta = {"resourceVersion": "42"}
        if start + 1 < len(NODES):
            meta["continue"] = str(start + 1)
        return self._json(
            200, {"kind": "NodeList", "apiVersion": "v1", "metadata": meta, "items": NODES[start : start + 1]}
        )


@pytest.fixture
def old_server(tmp_path):
    OldServer.seen = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), OldServer)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    kc = tmp_path / "kubeconfig"
    kc.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: old, cluster: {{server: "http://127.0.0.1:{srv.server_address[1]}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: c, context: {{cluster: old, user: u}}}}]
current-context: c
""")
    yield KubeGateway(str(kc), request_timeout=5)
    srv.shutdown()


def names(items):
    return [n["metadata"]["name"] for n in items]


def test_a_server_that_refuses_the_streaming_list_is_paged_from_then_on(old_server):
    gw = old_server
    OldServer.mode = "refuse"
    items, rv = gw.list_with_version("Node")
    assert names(items) == ["n0", "n1", "n2"] and rv == "42"
    assert all(n["kind"] == "Node" and n["apiVersion"] == "v1" for n in items)
    assert not gw.stream_lists
    OldServer.seen.clear()
    items, _ = gw.list_with_version("Node")
    assert names(items) == ["n0", "n1", "n2"]
    assert not any(q.get("watch") for q in OldServer.seen)  # not asked again


def test_a_stream_cut_before_its_bookmark_is_listed_again_through_pages(old_server):
    gw = old_server
    OldServer.mode = "cut"
    items, rv = gw.list_with_version("Node")
    assert names(items) == ["n0", "n1", "n2"] and rv == "42"  # the whole paged list, not the cut stream's two
    assert gw.stream_lists  # a cut stream says nothing about the server: the next list streams again
    assert [q.get("watch") for q in OldServer.seen][:1] == ["1"]
    assert [q.get("sendInitialEvents") for q in OldServer.seen][:1] == ["true"]
