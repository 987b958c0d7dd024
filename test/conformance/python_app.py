"""The conformance suite's Python app: python3's own http.server, as `python3 -m http.server` users run it.

SimpleHTTPRequestHandler with its default HTTP/1.0 (one response per connection, closed after it) serves
the files of the directory given as argv[1] under /files/; a few more routes mirror the Node app's.
Every request is recorded as the app received it (raw header bytes as latin1, body digest) and
GET /__last answers the record of the last request and forgets it.

Usage: python3 python_app.py DIRECTORY   (prints the port it listens on, then serves until killed)
"""
import hashlib
import json
import os
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

DIRECTORY = sys.argv[1]
TEXT_BODY = b"hello, world\n"
LAST = {"record": None}
RELEASES = {}
LOCK = threading.Lock()


def pattern_bytes(length):
    """The same bytes as the Node app's patternBytes(length)."""
    return bytes(((i * 7 + (i >> 8)) & 0xFF) for i in range(length))


class RecordingReader:
    """Wraps rfile while the head is parsed, keeping the raw header lines."""

    def __init__(self, inner):
        self.inner = inner
        self.lines = []

    def readline(self, *args):
        line = self.inner.readline(*args)
        self.lines.append(line)
        return line

    def __getattr__(self, name):
        return getattr(self.inner, name)


class Handler(SimpleHTTPRequestHandler):
    server_version = "ConformanceApp/1.0"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=DIRECTORY, **kwargs)

    def log_message(self, format, *args):
        pass

    def parse_request(self):
        reader = RecordingReader(self.rfile)
        self.rfile = reader
        try:
            return super().parse_request()
        finally:
            self.rfile = reader.inner
            self.raw_header_lines = reader.lines

    def __getattr__(self, name):
        # Any method, WebDAV's or made up, is served like GET's fallback route.
        if name.startswith("do_"):
            return self.handle_any
        raise AttributeError(name)

    # ---- recording ---------------------------------------------------------------------------------

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def record(self, body):
        headers = []
        for line in getattr(self, "raw_header_lines", []):
            text = line.decode("latin-1").rstrip("\r\n")
            if text == "":
                continue
            name, _, value = text.partition(":")
            headers.append([name, value.strip(" \t")])
        digest = hashlib.sha256(body).hexdigest()
        with LOCK:
            LAST["record"] = {
                "method": self.command,
                "target": self.path,
                "version": self.request_version.split("/")[1],
                "headers": headers,
                "bodyLength": len(body),
                "bodySha256": digest,
            }
        return digest

    # ---- routes ------------------------------------------------------------------------------------

    def do_GET(self):
        self.route()

    def do_HEAD(self):
        self.route()

    def do_POST(self):
        self.route()

    def do_PUT(self):
        self.route()

    def handle_any(self):
        self.route()

    def route(self):
        path, _, query = self.path.partition("?")
        if path == "/__last":
            with LOCK:
                record = LAST["record"]
                if query != "peek":
                    LAST["record"] = None
            self.send_bytes(200, "application/json", json.dumps(record).encode())
            return
        if path == "/__release":
            release = RELEASES.pop(query.replace("id=", ""), None)
            if release is not None:
                release.set()
            self.send_bytes(200, "text/plain", b"released")
            return
        body = self.read_body()
        digest = self.record(body)
        parts = path.split("/")
        if path.startswith("/files/") and self.command in ("GET", "HEAD"):
            self.path = self.path[len("/files"):]
            if self.command == "GET":
                super().do_GET()
            else:
                super().do_HEAD()
        elif path == "/text":
            self.send_bytes(200, "text/plain; charset=utf-8", TEXT_BODY)
        elif len(parts) == 3 and parts[1] == "bytes":
            self.send_bytes(200, "application/octet-stream", pattern_bytes(int(parts[2])))
        elif path == "/close-delimited":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"no length: the body runs to the end of the connection")
        elif path == "/upload":
            answer = json.dumps({"length": len(body), "sha256": digest}).encode()
            self.send_response(201)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.send_header("Location", "/upload/1")
            self.end_headers()
            self.wfile.write(answer)
        elif len(parts) == 3 and parts[1] == "redirect":
            self.send_response(int(parts[2]))
            self.send_header("Location", "/text?from=redirect")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/cookies":
            self.send_response(200)
            self.send_header("Set-Cookie", "session=abc123; Path=/; HttpOnly")
            self.send_header("Content-Type", "text/plain")
            self.send_header("Set-Cookie", "theme=dark; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Path=/")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
        elif len(parts) == 3 and parts[1] == "status":
            self.send_response(int(parts[2]))
            self.send_header("X-Status", parts[2])
            self.end_headers()
        elif path == "/latin1-header":
            # send_header encodes values as latin-1: this is the byte 0xE9.
            self.send_response(200)
            self.send_header("X-Word", "caf\u00e9")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
        elif path == "/sse":
            event = threading.Event()
            RELEASES[query.replace("id=", "")] = event
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            self.wfile.write(b"id: 1\ndata: one\n\n")
            self.wfile.write(b"id: 2\ndata: two\n\n")
            self.wfile.flush()
            event.wait(30)
            self.wfile.write(b"id: 3\nevent: end\ndata: three\n\n")
        else:
            self.send_bytes(200, "text/plain", f"{self.command} {self.path} {len(body)}\n".encode())

    def send_bytes(self, status, content_type, body):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    os.umask(0o022)
    main()
