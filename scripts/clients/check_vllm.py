"""vLLM: the request `keyslice analyze --url` sent (recorded) validated by vLLM's own request
model, its video decoded by vLLM's MediaConnector with the request's media_io_kwargs merged
over the server's defaults as vLLM merges them, and the timestamps vLLM's Qwen3-VL processing
computes for the frames it kept; also what a server without the request's media_io_kwargs
would keep.

Usage: python check_vllm.py WORK CHECKPOINT"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit  # noqa: E402

import vllm  # noqa: E402
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.model_executor.models.qwen3_vl import Qwen3VLProcessingInfo  # noqa: E402
from vllm.multimodal.media.connector import MediaConnector, merge_media_io_kwargs  # noqa: E402

work = sys.argv[1]
body = json.load(open(os.path.join(work, "request.json")))
request = ChatCompletionRequest(**body)
parts = request.messages[0]["content"]
video = next(part for part in parts if part["type"] == "video_url")["video_url"]["url"]
prompt = next(part for part in parts if part["type"] == "text")["text"]
sent = video.split(";base64,", 1)[1].count(",") + 1


def served(server_defaults, request_kwargs):
    merged = merge_media_io_kwargs(server_defaults, request_kwargs)
    frames, metadata = MediaConnector(media_io_kwargs=merged).fetch_video(video).media
    stamps = Qwen3VLProcessingInfo._calculate_timestamps(
        None, metadata["frames_indices"], metadata["fps"], 2)
    return {"frames_kept": int(frames.shape[0]), "fps": metadata["fps"],
            "timestamps": ["%.1f" % t for t in stamps]}


emit({
    "client": "vllm", "version": vllm.__version__, "frames_sent": sent,
    "media_io_kwargs": request.media_io_kwargs,
    "frame_table_in_prompt": prompt.count(",") >= sent - 1 and sent,
    **served(None, request.media_io_kwargs),
    "without_request_kwargs": served(None, None),
})
