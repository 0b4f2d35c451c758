"""A local chat-completions server for the batch benchmarks: answers every request after a
fixed latency, with a report for a diagnosis (many frames) and a local description for a
verification (one image). Standard library only."""

import base64
import json
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPORT = (
    "FINDINGS:\nLiver lesion 1:\nLocation: hepatic segment 7.\nSize: 3.0 x 2.5 cm.\n"
    "Enhancement relative to liver: Hypoattenuating.\nPancreas: no tumor.\n"
    "Left kidney: no tumor.\nRight kidney: no tumor.\nKey slice: 5\n"
)
LOCAL = "Liver lesion 1: Location: hepatic segment 7. Size: 3.1 x 2.4 cm."


def avi_frame_count(url):
    """The frame count in the main header of a Motion-JPEG AVI data URL
    (`data:video/x-msvideo;base64,…`)."""
    head = base64.b64decode(url.split(";base64,", 1)[1][:96])
    return struct.unpack_from("<I", head, 48)[0] if head[:4] == b"RIFF" else 0


def frames_in(parts):
    """Frames in a request: image parts, and the frames of a video part."""
    return sum(
        1 if p.get("type") == "image_url"
        else avi_frame_count(p["video_url"]["url"]) if p.get("type") == "video_url"
        else 0
        for p in parts
    )


def start(latency, slots=None, on_request=None, report=REPORT, local=LOCAL):
    """Starts a server; returns it and its base URL. At most `slots` requests are answered at
    a time (the rest wait), unlimited without; `on_request(+1 | -1, frames)` is called as a
    request arrives and as its answer leaves."""
    gate = threading.Semaphore(slots) if slots else None

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            frames = frames_in(body["messages"][0]["content"])
            if on_request:
                on_request(+1, frames)
            if gate:
                with gate:
                    time.sleep(latency)
            else:
                time.sleep(latency)
            text = report if frames > 1 else local
            answer = json.dumps(
                {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
            if on_request:
                on_request(-1, frames)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"
