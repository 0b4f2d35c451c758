#!/usr/bin/env python3
"""CPU speed of Keyslice's Qwen3-VL (candle) against the reference (transformers + PyTorch) on
the same checkpoint: prefill (vision tower + prompt) and greedy decoding, f32, same threads.

    pip install torch torchvision transformers pillow safetensors
    cargo build --release
    benches/qwen3vl_speed.py [--threads 2] [--new-tokens 32] [--size small] [--repeats 3]
                             [--rounds 3]

The checkpoint is random-weight, built here in the released layout from the tiny fixture's
tokenizer and processors with a larger body (`small`: text 1024 wide x 8 layers, vision 512
wide x 8 blocks, ~0.2 B parameters; `medium`: text 2048 x 12, vision 1024 x 12). The prompt is
a 448x448 image (196 visual tokens) and a question. Each side runs the prompt `--repeats`
times after one warm-up, in `--rounds` rounds that alternate the two sides (a shared machine's
speed drifts by 15 % within minutes); the medians over rounds are printed as a Markdown table
with each round's prefill ratio. Keyslice's figures come
from `keyslice vlm --json --repeats N` (`runs`): like PyTorch's, measured inside one process
after a warm-up run, so neither includes loading the weights or first-touch memory.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests/data/qwen3vl/tiny"
SIZES = {
    "small": dict(text=(1024, 8, 16, 8, 2816), vision=(512, 8, 8, 2048)),
    "medium": dict(text=(2048, 12, 16, 8, 6144), vision=(1024, 12, 16, 4096)),
}


def build(out: Path, size: str):
    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    for name in os.listdir(TINY):
        if name not in ("model.safetensors", "config.json"):
            shutil.copy(TINY / name, out / name)
    pre = json.loads((TINY / "preprocessor_config.json").read_text())
    pre["size"] = {"shortest_edge": 65536, "longest_edge": 16777216}
    (out / "preprocessor_config.json").write_text(json.dumps(pre, indent=2))
    tiny = json.loads((TINY / "config.json").read_text())
    (h, layers, heads, kv, inter) = SIZES[size]["text"]
    (vh, depth, vheads, vinter) = SIZES[size]["vision"]
    head_dim = h // heads
    half = head_dim // 2
    section = [half - 2 * (half * 3 // 8), half * 3 // 8, half * 3 // 8]
    text = dict(tiny["text_config"])
    text.update(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
                num_key_value_heads=kv, head_dim=head_dim, intermediate_size=inter)
    text["rope_parameters"] = dict(text.pop("rope_scaling"), rope_theta=text.pop("rope_theta"),
                                   mrope_section=section)
    vision = dict(tiny["vision_config"])
    vision.update(hidden_size=vh, depth=depth, num_heads=vheads, intermediate_size=vinter,
                  out_hidden_size=h, num_position_embeddings=2304, deepstack_visual_indexes=[1, 3, 5])
    config = Qwen3VLConfig(text_config=text, vision_config=vision,
                           **{k: tiny[k] for k in ("image_token_id", "video_token_id",
                                                   "vision_start_token_id", "vision_end_token_id")})
    torch.manual_seed(0)
    model = Qwen3VLForConditionalGeneration(config)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    model.save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    return params


def image(path: Path):
    import numpy as np
    from PIL import Image

    y, x = np.mgrid[0:448, 0:448]
    grey = (128 + 90 * np.sin(x / 17.0) * np.cos(y / 13.0)).astype(np.uint8)
    Image.fromarray(grey, "L").convert("RGB").save(path)


def reference(ckpt: Path, img: Path, prompt: str, new: int, repeats: int, threads: int):
    import torch
    from PIL import Image
    from transformers import AutoProcessor, Qwen3VLForConditionalGeneration

    torch.set_num_threads(threads)
    processor = AutoProcessor.from_pretrained(ckpt)
    model = Qwen3VLForConditionalGeneration.from_pretrained(ckpt, dtype=torch.float32).eval()
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = processor(text=[text], images=[Image.open(img).convert("RGB")], return_tensors="pt")
    kw = dict(do_sample=False, eos_token_id=None, pad_token_id=0)

    def timed(n):
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(**inputs, max_new_tokens=n, min_new_tokens=n, **kw)
        return (time.perf_counter() - start) * 1e3

    timed(2)
    prefill = [timed(1) for _ in range(repeats)]
    total = [timed(new) for _ in range(repeats)]
    p = statistics.median(prefill)
    return p, statistics.median(total) - p, inputs["input_ids"].shape[1]


def keyslice(ckpt: Path, img: Path, prompt: str, new: int, repeats: int, threads: int):
    """Like the reference: one process, the model loaded once, one warm-up run, then
    `repeats` timed runs of a prefill-only answer and `repeats` of a full one."""
    exe = ROOT / "target/release/keyslice"
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))

    def runs(n_new):
        out = subprocess.run(
            [str(exe), "vlm", "--model", str(ckpt), "--image", str(img), "--prompt", prompt,
             "--max-new-tokens", str(n_new), "--device", "cpu", "--json", "--ignore-eos",
             "--repeats", str(repeats + 1)],
            check=True, capture_output=True, text=True, env=env)
        return json.loads(out.stdout)["runs"][1:]

    prefill = runs(1)
    total = runs(new)
    p = statistics.median(r["prefill_ms"] for r in prefill)
    t = statistics.median(r["prefill_ms"] + r["decode_ms"] for r in total)
    return p, t - p, prefill[0]["prompt_tokens"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--size", choices=SIZES, default="small")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / "ckpt"
        ckpt.mkdir()
        params = build(ckpt, args.size)
        img = Path(tmp) / "image.png"
        image(img)
        prompt = "Describe the liver on this slice."
        rounds = []
        # Rounds alternate the two sides, so that a machine whose speed drifts (a shared
        # host) slows both alike; each round loads both models afresh.
        for r in range(args.rounds):
            t_p, t_d, n_t = reference(ckpt, img, prompt, args.new_tokens, args.repeats, args.threads)
            k_p, k_d, n_k = keyslice(ckpt, img, prompt, args.new_tokens, args.repeats, args.threads)
            if n_t != n_k:
                sys.exit(f"prompt lengths differ: reference {n_t}, keyslice {n_k}")
            rounds.append((t_p, t_d, k_p, k_d))
            print(f"round {r + 1}: prefill PyTorch {t_p:.0f} ms, Keyslice {k_p:.0f} ms "
                  f"({k_p / t_p:.2f}x)", file=sys.stderr)
        t_p, t_d, k_p, k_d = (statistics.median(col) for col in zip(*rounds))
        ratios = sorted(r[2] / r[0] for r in rounds)
        steps = args.new_tokens - 1
        print(f"checkpoint: {args.size}, {params / 1e6:.0f} M parameters, f32; prompt {n_k} tokens; "
              f"{args.new_tokens} new tokens; {args.threads} threads; medians of {args.rounds} "
              f"alternating rounds")
        print("| | prefill (ms) | decode (ms/token) |")
        print("|---|---:|---:|")
        print(f"| PyTorch {__import__('torch').__version__} + transformers | {t_p:.0f} | {t_d / steps:.1f} |")
        print(f"| Keyslice (candle) | {k_p:.0f} | {k_d / steps:.1f} |")
        print(f"Keyslice prefill / PyTorch prefill per round: "
              + ", ".join(f"{x:.2f}" for x in ratios))

if __name__ == "__main__":
    main()
