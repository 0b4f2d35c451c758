"""A chat-completions server that records the first request's JSON body to PATH and answers
with a fixed report. Prints nothing; writes the port it listens on to PATH.port.

Usage: python3 recording_server.py PATH
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

PATH = sys.argv[1]
ANSWER = ("Liver: no tumor. Pancreas: no tumor. Left kidney: no tumor. Right kidney: no tumor. "
          "Key slice: 10.")


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with open(PATH, "wb") as out:
            out.write(body)
        reply = json.dumps({
            "id": "x", "object": "chat.completion", "model": "tiny",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": ANSWER}}],
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
with open(PATH + ".port", "w") as out:
    out.write(str(server.server_address[1]))
server.serve_forever()
