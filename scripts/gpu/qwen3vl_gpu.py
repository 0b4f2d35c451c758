#!/usr/bin/env python3
"""Keyslice's Qwen3-VL on a GPU against the reference (transformers + PyTorch) on the same
random-weight checkpoint in the released Qwen3-VL-2B layout: greedy tokens, prefill and decode
speed, peak GPU memory, and one case analysed end to end.

Run on the GPU machine by `scripts/gpu/measure.sh` (which unpacks the CUDA build of the
binary and sets the library path); needs torch, transformers, pillow and numpy there, no
network, no Rust:

    scripts/gpu/qwen3vl_gpu.py --keyslice /path/to/keyslice --out OUT_DIR
        [--frames 32] [--size 512] [--new-tokens 32] [--repeats 5]

The checkpoint is built from a config with random weights (seeded), the tokenizer and
processor files of the tiny test fixture (`tests/data/qwen3vl/tiny`) and the released 2B's
body: text 2048 wide x 28 layers (16 query, 8 key/value heads of 128), 151,936 embeddings
tied to the output; vision 1024 wide x 24 blocks, deepstack at blocks 5, 11 and 17. Nothing
is downloaded. The prompt is a 32-frame 512x512 CT-like video at 2 frames per second and the
diagnosis prompt (`prompts/diagnose.txt`).

- tokens: f32 on both sides (transformers with `eager` attention for exact arithmetic): the
  greedy tokens must be equal; bf16: the index of the first divergence, if any.
- speed: bf16 on both sides, transformers with `sdpa` attention, the model loaded once, one
  warm-up, the median of `--repeats` answers: prefill (a one-token answer) and decode (per
  token, from a `--new-tokens` answer minus the prefill).
- memory: transformers' `torch.cuda.max_memory_allocated`; Keyslice's process's GPU memory
  as `nvidia-smi` reports it (its peak over the run, polled every 50 ms).
- end to end: `keyslice analyze` of one phantom with `--backend qwen3vl --device cuda`
  (wall clock, model load included).

Writes `OUT_DIR/qwen3vl_gpu.json` and prints a Markdown table.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests/data/qwen3vl/tiny"
FPS = 2.0


def build(out: Path) -> int:
    """The random-weight checkpoint in the released 2B layout, saved in f32."""
    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    for name in os.listdir(TINY):
        if name not in ("model.safetensors", "config.json"):
            shutil.copy(TINY / name, out / name)
    for name, key in (("preprocessor_config.json", "size"), ("video_preprocessor_config.json", "size")):
        pre = json.loads((TINY / name).read_text())
        # The released processors' bounds: a 512x512 frame is kept at its size.
        pre[key] = {"shortest_edge": 4096, "longest_edge": 25165824}
        if name.startswith("video"):
            pre.update(max_frames=768, max_video_tokens=65536, do_sample_frames=False)
        (out / name).write_text(json.dumps(pre, indent=2))
    tiny = json.loads((TINY / "config.json").read_text())
    text = dict(tiny["text_config"])
    text.update(hidden_size=2048, num_hidden_layers=28, num_attention_heads=16,
                num_key_value_heads=8, head_dim=128, intermediate_size=6144,
                vocab_size=151936, max_position_embeddings=262144, tie_word_embeddings=True)
    text["rope_parameters"] = dict(text.pop("rope_scaling"), rope_theta=text.pop("rope_theta"),
                                   mrope_section=[24, 20, 20])
    vision = dict(tiny["vision_config"])
    vision.update(hidden_size=1024, depth=24, num_heads=16, intermediate_size=4096,
                  out_hidden_size=2048, num_position_embeddings=2304,
                  deepstack_visual_indexes=[5, 11, 17])
    config = Qwen3VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True,
                           **{k: tiny[k] for k in ("image_token_id", "video_token_id",
                                                   "vision_start_token_id", "vision_end_token_id")})
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen3VLForConditionalGeneration(config)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    model.save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    del model
    torch.cuda.empty_cache()
    return params


def frames(folder: Path, count: int, size: int):
    """A CT-like video: a body ellipse with organs that move from frame to frame."""
    import numpy as np
    from PIL import Image

    folder.mkdir()
    y, x = np.mgrid[0:size, 0:size] / size - 0.5
    for k in range(count):
        t = k / max(count - 1, 1)
        body = (x / 0.42) ** 2 + (y / 0.33) ** 2 < 1
        liver = ((x + 0.15) / 0.16) ** 2 + ((y + 0.05) / (0.12 + 0.05 * t)) ** 2 < 1
        lesion = ((x + 0.12) / 0.03) ** 2 + ((y + 0.02) / 0.03) ** 2 < 1
        grey = np.where(body, 110, 10) + np.where(liver, 40, 0) - np.where(lesion & liver, 35, 0)
        grey = grey + 6 * np.sin(40 * x + 9 * t) * np.cos(33 * y)
        Image.fromarray(np.clip(grey, 0, 255).astype(np.uint8), "L").convert("RGB").save(
            folder / f"{k:03}.png")


def reference(ckpt: Path, video: Path, count: int, prompt: str, new: int, repeats: int,
              dtype: str, attention: str):
    import numpy as np
    import torch
    from PIL import Image
    from transformers import AutoProcessor, Qwen3VLForConditionalGeneration
    from transformers.video_utils import VideoMetadata

    torch_dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    processor = AutoProcessor.from_pretrained(ckpt)
    torch.cuda.reset_peak_memory_stats()
    model = Qwen3VLForConditionalGeneration.from_pretrained(
        ckpt, dtype=torch_dtype, attn_implementation=attention).to("cuda").eval()
    images = [np.asarray(Image.open(video / f"{k:03}.png").convert("RGB")) for k in range(count)]
    clip = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2)
    meta = VideoMetadata(total_num_frames=count, fps=FPS, frames_indices=list(range(count)))
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": prompt}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = processor(text=[text], videos=[clip], video_metadata=[meta], do_sample_frames=False,
                       return_tensors="pt")
    inputs.pop("video_metadata", None)
    inputs = inputs.to("cuda")
    kw = dict(do_sample=False, eos_token_id=None, pad_token_id=0)

    def answer(n):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=n, min_new_tokens=n, **kw)
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1e3, out[0, inputs["input_ids"].shape[1]:].tolist()

    answer(2)
    prefill = [answer(1)[0] for _ in range(repeats)]
    full = [answer(new) for _ in range(repeats)]
    p = statistics.median(prefill)
    result = dict(
        prompt_tokens=int(inputs["input_ids"].shape[1]),
        prefill_ms=p,
        decode_ms_per_token=(statistics.median(t for t, _ in full) - p) / max(new - 1, 1),
        tokens=full[0][1],
        peak_memory_mib=torch.cuda.max_memory_allocated() / 2**20,
        torch=torch.__version__,
    )
    del model
    torch.cuda.empty_cache()
    return result


class GpuMemory(threading.Thread):
    """The peak GPU memory `nvidia-smi` reports for one process."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            out = subprocess.run(
                ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                capture_output=True, text=True).stdout
            for line in out.splitlines():
                parts = [p.strip() for p in line.split(",")]
                if len(parts) == 2 and parts[0] == str(self.pid) and parts[1].isdigit():
                    self.peak = max(self.peak, float(parts[1]))
            time.sleep(0.05)


def keyslice(exe: str, ckpt: Path, video: Path, prompt: str, new: int, repeats: int, dtype: str):
    def runs(n_new):
        process = subprocess.Popen(
            [exe, "vlm", "--model", str(ckpt), "--video", str(video), "--fps", str(FPS),
             "--prompt", prompt, "--max-new-tokens", str(n_new), "--device", "cuda",
             "--dtype", dtype, "--json", "--ignore-eos", "--repeats", str(repeats + 1)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        memory = GpuMemory(process.pid)
        memory.start()
        out, err = process.communicate()
        memory.stop.set()
        if process.returncode != 0:
            sys.exit(f"keyslice vlm failed:\n{err}")
        answer = json.loads(out)
        return answer, memory.peak

    prefill, _ = runs(1)
    full, peak = runs(new)
    p = statistics.median(r["prefill_ms"] for r in prefill["runs"][1:])
    t = statistics.median(r["prefill_ms"] + r["decode_ms"] for r in full["runs"][1:])
    return dict(
        device=full["device"],
        prompt_tokens=full["runs"][0]["prompt_tokens"],
        prefill_ms=p,
        decode_ms_per_token=(t - p) / max(new - 1, 1),
        tokens=full["token_ids"],
        peak_memory_mib=peak,
    )


def first_divergence(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def end_to_end(exe: str, ckpt: Path, work: Path):
    subprocess.run([exe, "phantom", "--out", str(work / "phantom"), "--cases", "1", "--seed", "7"],
                   check=True, capture_output=True)
    case = next((work / "phantom").glob("PHANTOM_*"))
    start = time.perf_counter()
    out = subprocess.run([exe, "analyze", str(case), "--backend", "qwen3vl", "--model", str(ckpt),
                          "--device", "cuda", "--max-new-tokens", "128", "--json"],
                         capture_output=True, text=True)
    seconds = time.perf_counter() - start
    return dict(seconds=seconds, ok=out.returncode == 0, stderr=out.stderr[-2000:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keyslice", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--frames", type=int, default=32)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    prompt = (ROOT / "prompts/diagnose.txt").read_text().strip()
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    results = dict(gpu=gpu, frames=args.frames, size=args.size, new_tokens=args.new_tokens,
                   repeats=args.repeats)
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        ckpt = Path(tmp) / "ckpt"
        ckpt.mkdir()
        results["parameters"] = build(ckpt)
        video = Path(tmp) / "video"
        frames(video, args.frames, args.size)
        for dtype, attention in (("f32", "eager"), ("bf16", "sdpa")):
            ref = reference(ckpt, video, args.frames, prompt, args.new_tokens, args.repeats,
                            dtype, attention)
            ours = keyslice(args.keyslice, ckpt, video, prompt, args.new_tokens, args.repeats, dtype)
            results[dtype] = dict(reference=ref, keyslice=ours, attention=attention,
                                  first_divergence=first_divergence(ref["tokens"], ours["tokens"]))
            (out_dir / "qwen3vl_gpu.json").write_text(json.dumps(results, indent=2))
        results["end_to_end"] = end_to_end(args.keyslice, ckpt, Path(tmp))
    (out_dir / "qwen3vl_gpu.json").write_text(json.dumps(results, indent=2))
    print(f"{gpu}; checkpoint {results['parameters'] / 1e9:.2f} B parameters (2B layout, random); "
          f"{args.frames} frames {args.size}x{args.size}; {args.new_tokens} new tokens; "
          f"medians of {args.repeats}")
    for dtype in ("f32", "bf16"):
        r = results[dtype]
        same = "equal" if r["first_divergence"] is None else f"first divergence at {r['first_divergence']}"
        print(f"{dtype}: prompt {r['reference']['prompt_tokens']} / {r['keyslice']['prompt_tokens']} "
              f"tokens; greedy tokens {same}")
    r = results["bf16"]
    print("| bf16 | prefill (ms) | decode (ms/token) | peak GPU memory (MiB) |")
    print("|---|---:|---:|---:|")
    print(f"| transformers {r['attention']} (torch {r['reference']['torch']}) | "
          f"{r['reference']['prefill_ms']:.0f} | {r['reference']['decode_ms_per_token']:.1f} | "
          f"{r['reference']['peak_memory_mib']:.0f} |")
    print(f"| Keyslice (candle, {r['keyslice']['device']}) | {r['keyslice']['prefill_ms']:.0f} | "
          f"{r['keyslice']['decode_ms_per_token']:.1f} | {r['keyslice']['peak_memory_mib']:.0f} |")
    e = results["end_to_end"]
    print(f"analyze one phantom on the GPU: {e['seconds']:.1f} s wall clock ({'ok' if e['ok'] else 'failed'})")


if __name__ == "__main__":
    main()
