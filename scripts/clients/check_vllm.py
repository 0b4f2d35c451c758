"""vLLM: the request `keyslice analyze --url` sent (recorded) validated by vLLM's own request
model, its video decoded by vLLM's MediaConnector with the request's media_io_kwargs merged
over the server's defaults as vLLM merges them, and the timestamps vLLM's Qwen3-VL processing
computes for the frames it kept; also what a stock server (no request settings, started
without --trust-request-mm-kwargs) keeps, with the Qwen3-VL reader and with vLLM's generic one.
The video is a Motion-JPEG AVI that states its frame rate, so the stock server reads it at 2
frames per second.

Usage: python check_vllm.py WORK CHECKPOINT"""

import base64
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit  # noqa: E402

import vllm  # noqa: E402
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.entrypoints.generate.base.protocol import validate_request_mm_kwargs  # noqa: E402
from vllm.model_executor.models.qwen3_vl import Qwen3VLProcessingInfo  # noqa: E402
from vllm.multimodal.media.connector import MediaConnector, merge_media_io_kwargs  # noqa: E402

work = sys.argv[1]
body = json.load(open(os.path.join(work, "request.json")))
request = ChatCompletionRequest(**body)
parts = request.messages[0]["content"]
video = next(part for part in parts if part["type"] == "video_url")["video_url"]["url"]
prompt = next(part for part in parts if part["type"] == "text")["text"]
# The frame count the AVI's main header states.
sent = struct.unpack_from("<I", base64.b64decode(video.split(";base64,", 1)[1][:96]), 48)[0]


def served(server_defaults, request_kwargs, video_processor="Qwen3VLVideoProcessor"):
    """What a server with these defaults keeps of the video: a Qwen3-VL server picks its video
    reader by the model's processor, as vLLM's chat entry point does."""
    merged = merge_media_io_kwargs(server_defaults, request_kwargs)
    connector = MediaConnector(media_io_kwargs=merged)
    frames, metadata = connector.fetch_video(video, video_processor=video_processor).media
    stamps = Qwen3VLProcessingInfo._calculate_timestamps(
        None, metadata["frames_indices"], metadata["fps"], 2)
    return {"frames_kept": int(frames.shape[0]), "fps": metadata["fps"],
            "video_backend": metadata.get("video_backend"),
            "timestamps": ["%.1f" % t for t in stamps]}


def stock_server_accepts():
    """Whether a server started without --trust-request-mm-kwargs takes the request (vLLM's
    own check; it answers HTTP 400 otherwise)."""
    try:
        validate_request_mm_kwargs(mm_processor_kwargs=request.mm_processor_kwargs,
                                   media_io_kwargs=request.media_io_kwargs,
                                   trust_request_mm_kwargs=False)
        return True
    except Exception as refused:  # vLLM's VLLMValidationError
        return "refused: %s" % refused


emit({
    "client": "vllm", "version": vllm.__version__, "frames_sent": sent,
    "media_io_kwargs": request.media_io_kwargs,
    "stock_server_accepts_request": stock_server_accepts(),
    "frame_table_in_prompt": prompt.count(",") >= sent - 1 and sent,
    **served(None, request.media_io_kwargs),
    "without_request_kwargs": served(None, None),
    # A server whose model's processor has no reader of its own: vLLM's generic OpenCV one.
    "generic_reader_without_request_kwargs": served(None, None, video_processor=None),
})
