"""Checks that every client's model input carries the same frames and timestamps for the same
CT, and that they are the ones Keyslice's own Qwen3-VL gives frames at VIDEO_FPS (2 per
second: temporal patch p is stamped p + 0.25 seconds, shown with one decimal).

Usage: python3 compare.py WORK CLIENT..."""

import json
import os
import sys

work, clients = sys.argv[1], sys.argv[2:]
results = {}
for client in clients:
    path = os.path.join(work, client + ".json")
    if os.path.exists(path) and os.path.getsize(path):
        results[client] = json.loads(open(path).read().strip().splitlines()[-1])
frames = int(os.environ.get("FRAMES", "48"))
expected = ["%.1f" % (p + 0.25) for p in range((frames + 1) // 2)]
ok = True
for client, result in sorted(results.items()):
    stamps = result.get("timestamps")
    same = stamps == expected
    ok &= same
    print("%-13s %s frames, timestamps %s%s" % (
        client, result.get("frames_in_model_input", result.get("frames_kept",
                                                               result.get("frames_exported", "?"))),
        "same as keyslice" if same else "DIFFERENT: %s" % stamps[:6],
        "" if client != "vllm" else "; without the request's media_io_kwargs: %d frames, %s"
        % (result["without_request_kwargs"]["frames_kept"],
           result["without_request_kwargs"]["timestamps"][:3])))
# A stock vLLM (no request settings) must stamp the frames as the exports do: the video states
# its own frame rate.
stock = results.get("vllm", {}).get("without_request_kwargs")
if stock is not None and stock["timestamps"] != expected[:len(stock["timestamps"])]:
    print("vllm          a stock server stamps the frames DIFFERENTLY: %s" % stock["timestamps"][:6])
    ok = False
# ms-swift's encoded row carries every video token its processor made (with the template's
# video token id as the checkpoint numbers it, as a released checkpoint does).
for client in ("swift4", "swift3"):
    result = results.get(client)
    if result and result.get("video_pads_in_encoded_row") != result.get("video_pads_from_processor"):
        print("%-13s its row keeps %s of %s video tokens" % (
            client, result.get("video_pads_in_encoded_row"), result.get("video_pads_from_processor")))
        ok = False
missing = set(clients) - set(results)
if missing:
    print("no result from: %s" % ", ".join(sorted(missing)))
sys.exit(0 if ok and not missing else 1)
