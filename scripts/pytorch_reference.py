#!/usr/bin/env python3
"""PyTorch doing the same work as trainbench's model workloads, for side-by-side figures.

  pytorch_reference.py resnet50 [--batch 32] [--image 224] [--width 64] [--classes 1000]
      [--dtype f32|tf32|bf16|f16] [--threads N] [--steps 5] [--warmup 2] [--cuda]
      [--formats contiguous,channels_last]
      [--peak-from trainbench-report.json] -o report.json
    Times whole training steps (forward, loss, backward, SGD momentum) of torchvision's
    resnet50 on a fixed batch of seeded random images, once per memory format, and writes
    the figures in trainbench's report schema: backend pytorch-cpu (or pytorch-cuda) with the
    memory format as a variant, and the same workload line as trainbench's
    `resnet50-train` with direct convolutions (what PyTorch runs), so
    `trainbench compare --across-backends` puts them side by side.

  pytorch_reference.py bert [--model base|large|tiny] [--batch 8] [--seq 128]
      [--optimizer adamw|lamb] [--dropout 0.1] [--dtype f32|tf32|bf16|f16] [--threads N] [--steps 5]
      [--warmup 2] [--cuda] [--peak-from trainbench-report.json] -o report.json
    Times BERT pre-training steps (BertForPreTraining as HuggingFace names it, built from
    torch.nn modules, no downloads): masked positions gathered before the language-model
    head (20 per sequence at length 128, 76 at 512), masked-LM plus next-sentence loss,
    backward, AdamW or LAMB, on seeded random tokens. Checks the parameter count (base
    110,106,428; large 336,226,108) and writes the `bert-train` workload line.

  pytorch_reference.py matmul [--m 8192] [--n N] [--k K] [--dtype f32|tf32|bf16|f16]
      [--reps 10] [--steps 10] [--cuda] -o report.json
    torch.matmul on seeded random inputs (output in the inputs' dtype), checked on sampled
    outputs against fp64 and timed back to back: the peer of `gemm ... out=<dtype>`.

  pytorch_reference.py copy [--n 256Mi elements] [--reps 10] [--steps 10] [--cuda] -o report.json
    Tensor.copy_ between two arrays of fp64 (STREAM's copy), checked element for element and
    timed back to back, bytes counted once read and once written: the peer of `stream op=copy`.

  pytorch_reference.py resnet50-step --state STATE --batch BATCH --width W --classes C -o OUT
    One forward and backward (no update) from trainbench's saved state and batch
    (safetensors files); writes the loss and every parameter gradient to OUT, for trainbench's
    test to compare.

  pytorch_reference.py bert-step --state STATE --batch BATCH [--model tiny] -o OUT
    The same for BERT (no dropout), from trainbench's state (HuggingFace names, the tied
    decoder weight saved once) and batch (its input names: flat masked-LM rows, additive
    attention mask).

  pytorch_reference.py fashion-mnist [--target 0.9] [--batch 128] [--epochs 3] [--lr 0.1]
      [--runs 1] [--dtype f32|tf32|bf16|f16] [--cuda] -o report.json
    Time-to-train of trainbench's ResNet-8 on Fashion-MNIST with the same recipe (SGD
    momentum, weight decay 5e-4, OneCycleLR over the epoch budget, evaluation on the whole
    test set every half epoch, the clock started when the files are read), channels-last;
    writes the `ttt-fashion-mnist` line. The files are read from
    $TRAINBENCH_FASHION_MNIST_DIR when set, as trainbench reads them.

PyTorch's speed on CPU depends on the allocator (jemalloc without decay is 3-5x faster on
some machines than glibc's malloc); the report records LD_PRELOAD and MALLOC_CONF.
"""
import argparse
import datetime
import json
import math
import os
import platform
import socket
import statistics
import struct
import sys
import time

import torch
import torchvision

DTYPES = {"F32": (torch.float32, 4), "F64": (torch.float64, 8), "I32": (torch.int32, 4),
          "I64": (torch.int64, 8)}


def read_safetensors(path):
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        data = f.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype, _ = DTYPES[entry["dtype"]]
        begin, end = entry["data_offsets"]
        flat = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype)
        tensors[name] = flat.reshape(entry["shape"])
    return tensors


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    names = {torch_dtype: name for name, (torch_dtype, _) in DTYPES.items()}
    for name, tensor in tensors.items():
        raw = tensor.detach().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": names[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def make_model(width, classes):
    # torchvision fixes the stem at 64 channels; trainbench's width= scales it, so only the
    # default width has a torchvision peer.
    if width != 64:
        raise SystemExit(f"torchvision's resnet50 has width 64; width={width} has no peer")
    return torchvision.models.resnet50(num_classes=classes)


def order_statistic_ci(samples):
    """Distribution-free 95% interval for the median (binomial order statistics)."""
    ordered = sorted(samples)
    n = len(ordered)
    if n < 6:
        return ordered[0], ordered[-1]
    half = 1.96 * math.sqrt(n) / 2
    low = max(int(math.floor(n / 2 - half)), 0)
    high = min(int(math.ceil(n / 2 + half)), n - 1)
    return ordered[low], ordered[high]


def summarize(samples):
    low, high = order_statistic_ci(samples)
    return {"count": len(samples), "median_s": statistics.median(samples),
            "mean_s": statistics.fmean(samples), "min_s": min(samples), "max_s": max(samples),
            "stddev_s": statistics.stdev(samples) if len(samples) > 1 else 0.0,
            "ci95_low_s": low, "ci95_high_s": high}


def time_steps(step, args):
    """Runs `args.warmup` untimed steps, then times `args.steps` steps one by one (waiting
    for the GPU around each); returns every loss and every step's seconds."""
    losses, samples = [], []
    for _ in range(args.warmup):
        losses.append(float(step()))
    for _ in range(args.steps):
        if args.cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        loss = step()
        if args.cuda:
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - start)
        losses.append(float(loss))
    return losses, samples


def timed_and_checked(step, args, parameters, expected):
    """Times the steps; they pass when the parameter count is the model's and the loss is
    finite and falls on the fixed batch."""
    losses, samples = time_steps(step, args)
    ok = parameters == expected and all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    return losses, samples, summarize(samples), ok


def allocator():
    return {"LD_PRELOAD": os.environ.get("LD_PRELOAD", ""),
            "MALLOC_CONF": os.environ.get("MALLOC_CONF", "")}


def peaks_entry(dtype, peak):
    return {dtype: {"measured_gflops": peak, "theoretical_gflops": None,
                    "reason": "taken from the trainbench report given" if peak
                    else "not measured by this runner"}}


def environment():
    keys = ("OMP_", "KMP_", "MKL_", "OPENBLAS_", "ONEDNN_", "DNNL_", "LD_PRELOAD", "MALLOC_CONF",
            "CUDA_", "NVIDIA_TF32_OVERRIDE", "TORCH_")
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(keys)}


def host_section():
    model = ""
    isa = []
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not isa:
                flags = line.split(":", 1)[1].split()
                isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    with open("/proc/meminfo") as f:
        memory = int(f.readline().split()[1]) * 1024
    return {"hostname": socket.gethostname(), "cpu_model": model, "sockets": 0,
            "cores": os.cpu_count() or 0, "logical_cpus": os.cpu_count() or 0,
            "memory_bytes": memory, "numa_nodes": 0, "isa": isa, "caches": [],
            "os": platform.platform(), "kernel": platform.release(),
            "compiler": "PyTorch " + torch.__version__,
            "libraries": [{"name": "PyTorch", "version": torch.__version__},
                          {"name": "torchvision", "version": torchvision.__version__}],
            "environment": environment()}


def peak_from(report_path, dtype, backend="cpu-onednn"):
    if not report_path:
        return None
    with open(report_path) as f:
        report = json.load(f)
    for entry in report.get("backends", []):
        if entry["name"] == backend:
            return (entry.get("peaks", {}).get(dtype) or {}).get("measured_gflops")
    return None


def seeded_batch(batch, image, classes, seed):
    generator = torch.Generator().manual_seed(seed)
    images = torch.rand(batch, 3, image, image, generator=generator) * 2 - 1
    labels = torch.randint(0, classes, (batch,), generator=generator)
    return images, labels


def precision(args, device):
    """PyTorch's mixed precision for trainbench's dtype: autocast (bf16, f16), GradScaler for
    f16 (dynamic loss scaling), and the TF32 switches (on for tf32 only: trainbench's f32 is
    strict, while cuDNN's default allows TF32). Returns (autocast, scaler, implementation,
    math_mode)."""
    if args.dtype in ("tf32", "f16") and device.type != "cuda":
        raise SystemExit(f"--dtype {args.dtype} needs --cuda (no {args.dtype} arithmetic on CPU)")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
        torch.backends.cudnn.allow_tf32 = args.dtype == "tf32"
    low = {"bf16": torch.bfloat16, "f16": torch.float16}.get(args.dtype)
    autocast = torch.autocast(device_type=device.type, dtype=low or torch.bfloat16,
                              enabled=low is not None)
    # torch.amp.GradScaler from PyTorch 2.3 (Debian 13: 2.6); torch.cuda.amp's, deprecated
    # there, before (Debian 12: 1.13).
    if hasattr(torch.amp, "GradScaler"):
        scaler = torch.amp.GradScaler("cuda", enabled=args.dtype == "f16")
    else:
        scaler = torch.cuda.amp.GradScaler(enabled=args.dtype == "f16")
    implementation = {"bf16": ", bf16 autocast", "f16": ", f16 autocast with GradScaler",
                      "tf32": ", TF32 matmuls and convolutions"}.get(args.dtype, "")
    math_mode = {"f32": "strict", "bf16": "bf16 inputs, fp32 accumulation",
                 "f16": "f16 inputs, fp32 accumulation, dynamic loss scaling",
                 "tf32": "TF32 GEMMs and convolutions, fp32 accumulation"}[args.dtype]
    return autocast, scaler, implementation, math_mode


def scaled_step(loss, optimizer, scaler):
    """backward and update through the GradScaler (a pass-through unless f16)."""
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


def resnet50_bench(args):
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.cuda else "cpu")
    backend = "pytorch-cuda" if args.cuda else "pytorch-cpu"
    lr = args.lr if args.lr is not None else 0.1 * args.batch / 256
    workload = (f"resnet50-train batch={args.batch} image={args.image} width={args.width} "
                f"classes={args.classes} dtype={args.dtype} layout=native conv=direct lr={lr:g}")
    flops_per_image = 2 * 3 * 4.089e9 * (args.image / 224) ** 2
    peak = peak_from(args.peak_from, args.dtype)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    backends, results = [], []
    for memory_format in args.formats.split(","):
        fmt = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}[memory_format]
        torch.manual_seed(args.seed)
        model = make_model(args.width, args.classes).to(device).to(memory_format=fmt)
        parameters = sum(p.numel() for p in model.parameters())
        reference = torchvision.models.resnet50(num_classes=args.classes)
        expected = sum(p.numel() for p in reference.parameters())
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
        images, labels = seeded_batch(args.batch, args.image, args.classes, args.seed)
        images = images.to(device).contiguous(memory_format=fmt)
        labels = labels.to(device)
        loss_fn = torch.nn.CrossEntropyLoss()

        # autocast: PyTorch's mixed precision (fp32 master weights and optimizer).
        autocast, scaler, implementation, math_mode = precision(args, device)

        def step():
            optimizer.zero_grad(set_to_none=False)
            with autocast:
                loss = loss_fn(model(images), labels)
            scaled_step(loss, optimizer, scaler)
            return loss

        losses, samples, stats, ok = timed_and_checked(step, args, parameters, expected)
        gflops = flops_per_image * args.batch / stats["median_s"] / 1e9
        metrics = {"flops": flops_per_image * args.batch, "tflops": gflops / 1e3,
                   "samples_per_s": args.batch / stats["median_s"]}
        if peak:
            metrics["percent_of_peak"] = 100 * gflops / peak
        name = f"{backend}[memory_format={memory_format}]"
        details = {"model": "torchvision resnet50", "parameters": parameters,
                   "torchvision_parameters": expected, "memory_format": memory_format,
                   "threads": torch.get_num_threads(), "torch_version": torch.__version__,
                   "allocator": allocator(),
                   "mkldnn_enabled": torch.backends.mkldnn.enabled,
                   "parallel_info": torch.__config__.parallel_info(), "losses": losses,
                   "peak_source": args.peak_from or ""}
        backends.append({"name": name, "variant_of": backend, "environment": environment(),
                         "available": True, "reason": "", "device": None,
                         "peaks": peaks_entry(args.dtype, peak)})
        results.append({"workload": workload, "backend": name, "dtype": args.dtype,
                        "status": "passed" if ok else "failed",
                        "reason": "" if ok else f"parameters {parameters} vs {expected}, losses {losses}",
                        "implementation": f"PyTorch {torch.__version__} eager, {memory_format}"
                        + implementation,
                        "math_mode": math_mode, "details": details,
                        "validation": {"passed": ok, "method":
                                       "parameter count equals torchvision's; loss finite and "
                                       "falling on the fixed batch", "error": 0.0,
                                       "tolerance": 0.0, "checked": parameters,
                                       "message": "" if ok else "see reason"},
                        "samples_s": samples, "units_per_sample": 1, "warmup_runs": args.warmup,
                        "stats": stats, "metrics": metrics})
        print(f"{name}: {args.batch / stats['median_s']:.2f} img/s "
              f"(median step {stats['median_s'] * 1e3:.0f} ms, {gflops:.0f} GFLOP/s"
              + (f", {100 * gflops / peak:.1f}% of peak" if peak else "") + ")", file=sys.stderr)
    write_report(args, started, backends, results)
    return 0 if all(r["status"] == "passed" for r in results) else 1


# --- BERT ---

BERT_CONFIGS = {  # layers, hidden, heads, intermediate
    "base": (12, 768, 12, 3072), "large": (24, 1024, 16, 4096), "tiny": (2, 128, 2, 512)}
BERT_PARAMETERS = {"base": 110_106_428, "large": 336_226_108}
# trainbench's bert-train defaults: LAMB scales each tensor's step to lr |w|, so it needs a
# larger rate than AdamW for a comparable step.
BERT_LEARNING_RATES = {"adamw": 1e-4, "lamb": 2e-3}
VOCAB, POSITIONS, TOKEN_TYPES = 30522, 512, 2


def bert_flops_per_sequence(layers, hidden, intermediate, seq, predictions):
    """Training FLOPs of one sequence: 3 x forward, 2 per multiply-add, every GEMM counted:
    per layer Q, K, V and output projections (4 S H^2), the feed-forward (2 S H F), attention
    scores and context (2 S^2 H); the pooler (H^2, first token), the language-model head on
    the gathered positions only (P H^2 + P H V) and next-sentence (2 H)."""
    layer = 4 * seq * hidden ** 2 + 2 * seq * hidden * intermediate + 2 * seq ** 2 * hidden
    head = hidden ** 2 + predictions * hidden ** 2 + predictions * hidden * VOCAB + 2 * hidden
    return 2 * 3 * (layers * layer + head)


def make_bert(model, dropout, fused_attention=False):
    """fused_attention: torch's scaled_dot_product_attention with no dropout on the
    probabilities, as trainbench's attention=fused runs it."""
    layers, hidden, heads, intermediate = BERT_CONFIGS[model]
    nn = torch.nn
    if fused_attention and not hasattr(nn.functional, "scaled_dot_product_attention"):
        raise SystemExit(f"--attention fused needs PyTorch 2.0 or later (this is {torch.__version__})")

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
            self.dropout = nn.Dropout(dropout)

        def forward(self, x, mask_bias):
            b, s, _ = x.shape
            split = lambda t: t.view(b, s, heads, hidden // heads).transpose(1, 2)
            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            if fused_attention:
                context = nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask_bias.to(q.dtype), dropout_p=0.0)
                return context.transpose(1, 2).reshape(b, s, hidden)
            scores = q @ k.transpose(-1, -2) / math.sqrt(hidden // heads) + mask_bias
            context = self.dropout(scores.softmax(-1)) @ v
            return context.transpose(1, 2).reshape(b, s, hidden)

    class Output(nn.Module):  # dense, dropout, residual, layer norm
        def __init__(self, inputs):
            super().__init__()
            self.dense = nn.Linear(inputs, hidden)
            self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x, residual):
            return self.LayerNorm(self.dropout(self.dense(x)) + residual)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            setattr(self, "self", SelfAttention())
            self.output = Output(hidden)

        def forward(self, x, mask_bias):
            return self.output(getattr(self, "self")(x, mask_bias), x)

    class Intermediate(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = nn.Linear(hidden, intermediate)

        def forward(self, x):
            return nn.functional.gelu(self.dense(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention, self.intermediate, self.output = Attention(), Intermediate(), Output(intermediate)

        def forward(self, x, mask_bias):
            x = self.attention(x, mask_bias)
            return self.output(self.intermediate(x), x)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.ModuleList(Layer() for _ in range(layers))

    class Embeddings(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(VOCAB, hidden)
            self.position_embeddings = nn.Embedding(POSITIONS, hidden)
            self.token_type_embeddings = nn.Embedding(TOKEN_TYPES, hidden)
            self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
            self.dropout = nn.Dropout(dropout)

        def forward(self, ids, types):
            positions = torch.arange(ids.shape[1], device=ids.device)
            x = self.word_embeddings(ids) + self.position_embeddings(positions) + \
                self.token_type_embeddings(types)
            return self.dropout(self.LayerNorm(x))

    class Pooler(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = nn.Linear(hidden, hidden)

        def forward(self, x):
            return torch.tanh(self.dense(x[:, 0]))

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings, self.encoder, self.pooler = Embeddings(), Encoder(), Pooler()

        def forward(self, ids, types, mask_bias):
            """mask_bias: [batch, seq], 0 to attend, -10000 to drop (BERT's additive mask)."""
            mask_bias = mask_bias[:, None, None, :]
            x = self.embeddings(ids, types)
            for layer in self.encoder.layer:
                x = layer(x, mask_bias)
            return x, self.pooler(x)

    class Transform(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = nn.Linear(hidden, hidden)
            self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, x):
            # Layer norm in fp32 under bf16 autocast, as autocast's CUDA policy does (PyTorch
            # 1.13's CPU autocast would hand it bf16 data with fp32 weights).
            h = nn.functional.gelu(self.dense(x))
            return self.LayerNorm(h.float() if h.dtype == torch.bfloat16 else h)

    class Predictions(nn.Module):
        def __init__(self, embeddings):
            super().__init__()
            self.transform = Transform()
            self.decoder = nn.Linear(hidden, VOCAB, bias=False)
            self.decoder.weight = embeddings.word_embeddings.weight  # tied
            self.bias = nn.Parameter(torch.zeros(VOCAB))

        def forward(self, x):
            return self.decoder(self.transform(x)) + self.bias

    class Heads(nn.Module):
        def __init__(self, embeddings):
            super().__init__()
            self.predictions = Predictions(embeddings)
            self.seq_relationship = nn.Linear(hidden, 2)

    class BertForPreTraining(nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = Bert()
            self.cls = Heads(self.bert.embeddings)

        def forward(self, ids, types, mask_bias, positions):
            sequence, pooled = self.bert(ids, types, mask_bias)
            # The language-model head reads the masked positions only.
            gathered = sequence.gather(1, positions[:, :, None].expand(-1, -1, hidden))
            return self.cls.predictions(gathered), self.cls.seq_relationship(pooled)

    model = BertForPreTraining()
    # BERT's initialization: normal(0, 0.02) weights, zero biases, unit layer norms.
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
    return model


class Lamb(torch.optim.Optimizer):
    """LAMB as trainbench's op computes it: AdamW's moments with bias correction, per tensor
    trust ratio |w| / |u| (1 when either is 0), w -= lr r u."""

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["step"], state["m"], state["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                state["step"] += 1
                m, v, t = state["m"], state["v"], state["step"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                update = (m / (1 - beta1 ** t)) / ((v / (1 - beta2 ** t)).sqrt() + group["eps"])
                update.add_(p, alpha=group["weight_decay"])
                w_norm, u_norm = p.norm(), update.norm()
                ratio = (w_norm / u_norm) if w_norm > 0 and u_norm > 0 else 1.0
                p.add_(update, alpha=-group["lr"] * float(ratio))


def bert_bench(args):
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.cuda else "cpu")
    backend = "pytorch-cuda" if args.cuda else "pytorch-cpu"
    layers, hidden, heads, intermediate = BERT_CONFIGS[args.model]
    predictions = 20 if args.seq <= 128 else 76
    lr = args.lr if args.lr is not None else BERT_LEARNING_RATES[args.optimizer]
    workload = (f"bert-train model={args.model} batch={args.batch} seq={args.seq} "
                f"dtype={args.dtype} optimizer={args.optimizer} dropout={args.dropout:g} lr={lr:g}"
                + (" attention=fused" if args.attention == "fused" else ""))
    flops = bert_flops_per_sequence(layers, hidden, intermediate, args.seq, predictions) * args.batch
    peak = peak_from(args.peak_from, args.dtype)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    torch.manual_seed(args.seed)
    model = make_bert(args.model, args.dropout, args.attention == "fused").to(device)
    parameters = sum(p.numel() for p in model.parameters())  # the tied decoder counts once
    expected = BERT_PARAMETERS.get(args.model, parameters)
    optimizer = (torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-6,
                                   weight_decay=0.01) if args.optimizer == "adamw"
                 else Lamb(model.parameters(), lr=lr))
    generator = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(0, VOCAB, (args.batch, args.seq), generator=generator).to(device)
    types = (torch.arange(args.seq)[None, :] >= args.seq // 2).long().expand(args.batch, -1).to(device)
    mask = torch.zeros(args.batch, args.seq, device=device)  # additive: every position attends
    positions = torch.stack([torch.randperm(args.seq, generator=generator)[:predictions]
                             for _ in range(args.batch)]).to(device)
    mlm_labels = torch.randint(0, VOCAB, (args.batch, predictions), generator=generator).to(device)
    nsp_labels = torch.randint(0, 2, (args.batch,), generator=generator).to(device)
    autocast, scaler, implementation, math_mode = precision(args, device)

    def step():
        optimizer.zero_grad(set_to_none=False)
        with autocast:
            mlm, nsp = model(ids, types, mask, positions)
            loss = (torch.nn.functional.cross_entropy(mlm.float().reshape(-1, VOCAB), mlm_labels.reshape(-1))
                    + torch.nn.functional.cross_entropy(nsp.float(), nsp_labels))
        scaled_step(loss, optimizer, scaler)
        return loss

    losses, samples, stats, ok = timed_and_checked(step, args, parameters, expected)
    gflops = flops / stats["median_s"] / 1e9
    metrics = {"flops": flops, "tflops": gflops / 1e3, "samples_per_s": args.batch / stats["median_s"],
               "tokens_per_s": args.batch * args.seq / stats["median_s"]}
    if peak:
        metrics["percent_of_peak"] = 100 * gflops / peak
    details = {"model": f"BertForPreTraining ({args.model}, HuggingFace names)", "parameters": parameters,
               "expected_parameters": expected, "tokens_per_s": args.batch * args.seq / stats["median_s"],
               "predictions_per_sequence": predictions, "threads": torch.get_num_threads(),
               "torch_version": torch.__version__,
               "allocator": allocator(),
               "flop_formula": bert_flops_per_sequence.__doc__, "losses": losses}
    print(f"{backend} bert-{args.model}: {args.batch / stats['median_s']:.2f} seq/s "
          f"(median step {stats['median_s'] * 1e3:.0f} ms, {gflops:.0f} GFLOP/s"
          + (f", {100 * gflops / peak:.1f}% of peak" if peak else "") + f"), {parameters:,} parameters",
          file=sys.stderr)
    result = {"workload": workload, "backend": backend, "dtype": args.dtype,
              "status": "passed" if ok else "failed",
              "reason": "" if ok else f"parameters {parameters} vs {expected}, losses {losses}",
              "implementation": f"PyTorch {torch.__version__} eager" + implementation,
              "math_mode": math_mode,
              "details": details,
              "validation": {"passed": ok, "method": "parameter count equals BERT's; loss finite and falling",
                             "error": 0.0, "tolerance": 0.0, "checked": parameters,
                             "message": "" if ok else "see reason"},
              "samples_s": samples, "units_per_sample": 1, "warmup_runs": args.warmup,
              "stats": stats, "metrics": metrics}
    backends = [{"name": backend, "available": True, "reason": "", "device": None,
                 "peaks": peaks_entry(args.dtype, peak)}]
    write_report(args, started, backends, [result])
    return 0 if ok else 1


# --- Time-to-train: Fashion-MNIST ---

# Where Debian's dataset-fashion-mnist installs it, or a copy (as trainbench reads it).
FASHION_MNIST = os.environ.get("TRAINBENCH_FASHION_MNIST_DIR") or "/usr/share/datasets/fashion-mnist"
FASHION_MEAN, FASHION_STD = 0.2860, 0.3530


def read_idx(path, dims):
    """An unsigned-byte IDX file (gzip-compressed), checked as trainbench checks it."""
    import gzip
    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[:4] != bytes([0, 0, 8, dims]):
        raise SystemExit(f"{path}: not an unsigned-byte IDX file of {dims} dimensions")
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    values = torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8)
    if values.numel() != math.prod(shape):
        raise SystemExit(f"{path}: {values.numel()} values, the header declares {shape}")
    return values.reshape(shape)


def load_fashion_mnist():
    def split(prefix):
        images = read_idx(f"{FASHION_MNIST}/{prefix}-images-idx3-ubyte.gz", 3)
        labels = read_idx(f"{FASHION_MNIST}/{prefix}-labels-idx1-ubyte.gz", 1).long()
        return ((images.float() / 255 - FASHION_MEAN) / FASHION_STD)[:, None], labels
    return split("train"), split("t10k")


def make_resnet8():
    """trainbench's ResNet-8: torchvision's BasicBlock and names, a 3x3 stride-1 stem of 32
    channels without max-pool, one block per stage at 32/64/128 channels, 10 classes."""
    nn = torch.nn
    block = torchvision.models.resnet.BasicBlock
    model = torchvision.models.resnet.ResNet(block, [1, 1, 1, 1], num_classes=10, width_per_group=64)
    model.inplanes = 32
    model.conv1 = nn.Conv2d(1, 32, 3, 1, 1, bias=False)
    model.bn1 = nn.BatchNorm2d(32)
    model.maxpool = nn.Identity()
    model.layer1 = model._make_layer(block, 32, 1)
    model.layer2 = model._make_layer(block, 64, 1, stride=2)
    model.layer3 = model._make_layer(block, 128, 1, stride=2)
    model.layer4 = nn.Identity()
    model.fc = nn.Linear(128, 10)
    for m in model.modules():  # torchvision's initialization for the replaced layers
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
    return model


def fashion_mnist_bench(args):
    """Time-to-train with trainbench's recipe; the clock starts when the data files are read.
    With --cuda the model and both splits live on the GPU (channels-last, AMP as for the other
    runs); an evaluation's accuracy is read back on the host, so each curve point waits for it."""
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.cuda else "cpu")
    backend = "pytorch-cuda" if args.cuda else "pytorch-cpu"
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    workload = (f"ttt-fashion-mnist target={args.target:g} batch={args.batch} dtype={args.dtype} "
                f"epochs={args.epochs} lr={args.lr:g} runs={args.runs}")
    runs = []
    for r in range(args.runs):
        torch.manual_seed(args.seed + r)
        model = make_resnet8().to(device).to(memory_format=torch.channels_last)
        parameters = sum(p.numel() for p in model.parameters())
        if parameters != 308_074:
            raise SystemExit(f"ResNet-8 has {parameters} parameters, trainbench's 308,074")
        steps_per_epoch = 60000 // args.batch
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
        schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr,
                                                       total_steps=steps_per_epoch * args.epochs)
        autocast, scaler, implementation, math_mode = precision(args, device)
        start = time.perf_counter()
        (train_x, train_y), (test_x, test_y) = load_fashion_mnist()
        train_x = train_x.to(device).contiguous(memory_format=torch.channels_last)
        test_x = test_x.to(device).contiguous(memory_format=torch.channels_last)
        train_y, test_y = train_y.to(device), test_y.to(device)
        run = {"seed": args.seed + r, "converged": False, "curve": [], "steps": 0, "samples": 0}
        generator = torch.Generator().manual_seed(args.seed + r)
        for epoch in range(args.epochs):
            order = torch.randperm(60000, generator=generator).to(device)
            for s in range(steps_per_epoch):
                model.train()
                rows = order[s * args.batch:(s + 1) * args.batch]
                with autocast:
                    loss = torch.nn.functional.cross_entropy(model(train_x[rows]).float(), train_y[rows])
                optimizer.zero_grad(set_to_none=True)
                scaled_step(loss, optimizer, scaler)
                schedule.step()
                run["steps"] += 1
                run["samples"] += args.batch
                if (s + 1) % (steps_per_epoch // 2):
                    continue
                model.eval()
                correct = 0
                with torch.no_grad(), autocast:
                    for first in range(0, 10000, 1000):
                        logits = model(test_x[first:first + 1000])
                        correct += int((logits.argmax(1) == test_y[first:first + 1000]).sum())
                accuracy = correct / 10000
                elapsed = time.perf_counter() - start
                run["curve"].append({"time_s": elapsed, "samples": run["samples"],
                                     "epoch": run["steps"] / steps_per_epoch, "quality": accuracy})
                print(f"run {r}: epoch {run['steps'] / steps_per_epoch:.1f}, {elapsed:.1f} s, "
                      f"accuracy {accuracy:.4f}", file=sys.stderr)
                if accuracy >= args.target:
                    run["converged"], run["time_to_train_s"] = True, elapsed
                    break
            if run["converged"]:
                break
        runs.append(run)
    times = sorted(run["time_to_train_s"] for run in runs if run["converged"])
    ok = bool(times)
    kept = times[1:-1] if len(times) >= 3 else times
    details = {"model": "ResNet-8 (torchvision BasicBlock, 3x3 stem 32 ch, 32/64/128 ch)",
               "parameters": 308_074, "target": args.target, "quality": "test accuracy", "runs": runs,
               "runs_converged": len(times), "runs_attempted": args.runs,
               "time_to_train_s": sum(kept) / len(kept) if kept else None,
               "memory_format": "channels_last", "threads": torch.get_num_threads(),
               "device": torch.cuda.get_device_name() if args.cuda else "cpu",
               "torch_version": torch.__version__, "allocator": allocator()}
    result = {"workload": workload, "backend": backend, "dtype": args.dtype,
              "status": "passed" if ok else "failed",
              "reason": "" if ok else f"no run reached {args.target:g} within {args.epochs} epochs",
              "implementation": f"PyTorch {torch.__version__} eager, channels_last" + implementation,
              "math_mode": math_mode,
              "details": details,
              "validation": {"passed": ok, "method": "accuracy on the full test set", "error": 0.0,
                             "tolerance": 0.0, "checked": 10000, "message": ""},
              "samples_s": times, "units_per_sample": 1, "warmup_runs": 0,
              "stats": summarize(times) if times else None, "metrics": {}}
    args.warmup, args.steps = 0, args.runs
    write_report(args, started, [{"name": backend, "available": True, "reason": "",
                                  "device": None, "peaks": {}}], [result])
    return 0 if ok else 1


def write_report(args, started, backends, results):
    report = {"schema_version": 1,
              "tool": {"name": "pytorch_reference", "version": "0.1.0", "git_commit": "", "build_type": ""},
              "command": " ".join(sys.argv), "started_at": started,
              "finished_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "settings": {"threads": args.threads, "pin": "none", "seed": args.seed, "suite": None,
                           "warmup_runs": args.warmup, "warmup_seconds": 0.0,
                           "min_repetitions": args.steps, "max_repetitions": args.steps,
                           "time_budget_seconds": 0.0, "min_sample_seconds": 0.0},
              "host": host_section(), "backends": backends, "results": results}
    tmp = args.output + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, args.output)


def write_loss_and_gradients(path, loss, model):
    """Backward from `loss`; writes it and every parameter's gradient, by name."""
    loss.backward()
    out = {"loss": loss.detach().reshape(1)}
    for name, parameter in model.named_parameters():
        out[name] = parameter.grad
    write_safetensors(path, out)
    return 0


def resnet50_step(args):
    torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64 if args.double else torch.float32)
    model = make_model(args.width, args.classes)
    model.train()
    state = read_safetensors(args.state)
    dtype = torch.float64 if args.double else torch.float32
    converted = {k: (v.to(dtype) if v.is_floating_point() else v.to(torch.int64)) for k, v in state.items()}
    model.load_state_dict(converted, strict=True)
    batch = read_safetensors(args.batch)
    images = batch["images"].to(dtype)
    labels = batch["labels"].to(torch.int64)
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    return write_loss_and_gradients(args.output, loss, model)


def bert_step(args):
    """One forward and backward (no update, no dropout) of BertForPreTraining from trainbench's
    saved state and batch; writes the loss and every parameter gradient."""
    torch.set_num_threads(args.threads)
    dtype = torch.float64 if args.double else torch.float32
    torch.set_default_dtype(dtype)
    model = make_bert(args.model, 0.0)
    state = read_safetensors(args.state)
    converted = {k: v.to(dtype) for k, v in state.items()}
    missing, unexpected = model.load_state_dict(converted, strict=False)
    # The decoder's weight is the word embeddings' (tied): trainbench saves it once.
    if missing != ["cls.predictions.decoder.weight"] or unexpected:
        raise SystemExit(f"state does not match BertForPreTraining: missing {missing}, "
                         f"unexpected {unexpected}")
    batch = {k: v for k, v in read_safetensors(args.batch).items()}
    b, s = batch["attention_mask"].shape
    ids = batch["input_ids"].to(torch.int64).reshape(b, s)
    types = batch["token_type_ids"].to(torch.int64).reshape(b, s)
    if not torch.equal(batch["position_ids"].to(torch.int64).reshape(b, s),
                       torch.arange(s).expand(b, -1)):
        raise SystemExit("position_ids must be 0 .. seq-1 in every sequence")
    if not torch.equal(batch["first_token_rows"].to(torch.int64), torch.arange(b) * s):
        raise SystemExit("first_token_rows must be each sequence's first row")
    rows = batch["masked_lm_rows"].to(torch.int64).reshape(b, -1)
    positions = rows - (torch.arange(b) * s)[:, None]
    mlm, nsp = model(ids, types, batch["attention_mask"].to(dtype), positions)
    loss = (torch.nn.functional.cross_entropy(mlm.reshape(-1, VOCAB),
                                              batch["masked_lm_labels"].to(torch.int64))
            + torch.nn.functional.cross_entropy(nsp, batch["next_sentence_labels"].to(torch.int64)))
    return write_loss_and_gradients(args.output, loss, model)


def plain_backend(name):
    """A report's backend entry for a peer that measures no peaks of its own."""
    return {"name": name, "environment": environment(), "available": True,
            "reason": "", "device": None, "peaks": {}}


def seconds_per_rep(work, reps, cuda):
    """Seconds per call of `work`, timed over `reps` calls back to back (CUDA events on GPU)."""
    if cuda:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            work()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) * 1e-3 / reps
    began = time.perf_counter()
    for _ in range(reps):
        work()
    return (time.perf_counter() - began) / reps


def matmul_bench(args):
    """torch.matmul on seeded random inputs, the peer of trainbench's `gemm m n k dtype` with
    the output in the inputs' dtype (what torch.matmul returns); each sample times `--reps`
    matmuls back to back (CUDA events on GPU), after a check of sampled outputs against fp64."""
    device = torch.device("cuda" if args.cuda else "cpu")
    torch.set_num_threads(args.threads)
    if args.dtype in ("tf32", "f16") and not args.cuda:
        raise SystemExit(f"--dtype {args.dtype} needs --cuda")
    if args.cuda:
        torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    dtype = {"f32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
             "f16": torch.float16}[args.dtype]
    n, k = args.n or args.m, args.k or args.m
    generator = torch.Generator().manual_seed(args.seed)
    a = (torch.rand(args.m, k, generator=generator) * 2 - 1).to(device=device, dtype=dtype)
    b = (torch.rand(k, n, generator=generator) * 2 - 1).to(device=device, dtype=dtype)
    c = torch.matmul(a, b)
    rows, cols = slice(0, 16), slice(0, 16)
    want = a[rows].double() @ b[:, cols].double()
    magnitude = a[rows].double().abs() @ b[:, cols].double().abs()
    error = float(((c[rows, cols].double() - want).abs() / magnitude).max())
    tolerance = {"f32": 1e-5, "tf32": 2e-3, "bf16": 1e-2, "f16": 2e-3}[args.dtype]

    def sample():
        return seconds_per_rep(lambda: torch.matmul(a, b), args.reps, args.cuda)

    for _ in range(args.warmup):
        sample()
    samples = [sample() for _ in range(args.steps)]
    stats = summarize(samples)
    flops = 2.0 * args.m * n * k
    ok = math.isfinite(error) and error <= tolerance
    out = args.dtype if args.dtype in ("bf16", "f16") else "f32"
    backend = "pytorch-cuda" if args.cuda else "pytorch-cpu"
    workload = (f"gemm m={args.m} n={n} k={k} dtype={args.dtype} out={out} ta=n tb=n alpha=1 "
                f"beta=0 layout=plain")
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = {"workload": workload, "backend": backend, "dtype": args.dtype,
              "status": "passed" if ok else "failed",
              "reason": "" if ok else f"sampled error {error:.3g} > {tolerance:g}",
              "implementation": f"PyTorch {torch.__version__} torch.matmul",
              "math_mode": "TF32" if args.dtype == "tf32" else "strict" if args.dtype == "f32"
              else f"{args.dtype} inputs, fp32 accumulation",
              "details": {"reps_per_sample": args.reps, "torch_version": torch.__version__},
              "validation": {"passed": ok, "method": "16 x 16 sampled outputs against fp64, "
                             "relative to the sum of absolute terms", "error": error,
                             "tolerance": tolerance, "checked": 256, "message": ""},
              "samples_s": samples, "units_per_sample": args.reps, "warmup_runs": args.warmup,
              "stats": stats, "metrics": {"flops": flops, "tflops": flops / stats["median_s"] / 1e12}}
    write_report(args, started, [plain_backend(backend)], [result])
    print(f"{backend} {workload}: {flops / stats['median_s'] / 1e12:.1f} TFLOP/s "
          f"(median {stats['median_s'] * 1e3:.3f} ms, sampled error {error:.2g})", file=sys.stderr)
    return 0 if ok else 1


def copy_bench(args):
    """Tensor.copy_ of n seeded random doubles, the peer of trainbench's `stream op=copy`: bytes
    counted as STREAM counts them (each array once), CUDA events on the GPU."""
    device = torch.device("cuda" if args.cuda else "cpu")
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(args.seed)
    source = torch.rand(args.n, generator=generator, dtype=torch.float64).to(device)
    target = torch.empty_like(source)
    target.copy_(source)
    ok = bool(torch.equal(target, source))
    target.zero_()

    def sample():
        return seconds_per_rep(lambda: target.copy_(source), args.reps, args.cuda)

    for _ in range(args.warmup):
        sample()
    samples = [sample() for _ in range(args.steps)]
    ok = ok and bool(torch.equal(target, source))
    stats = summarize(samples)
    moved = 2.0 * 8 * args.n
    backend = "pytorch-cuda" if args.cuda else "pytorch-cpu"
    workload = f"stream op=copy n={args.n}"
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = {"workload": workload, "backend": backend, "dtype": "f64",
              "status": "passed" if ok else "failed",
              "reason": "" if ok else "the copy differs from its source",
              "implementation": f"PyTorch {torch.__version__} Tensor.copy_",
              "math_mode": "strict", "details": {"reps_per_sample": args.reps,
                                                 "torch_version": torch.__version__},
              "validation": {"passed": ok, "method": "every element equal to its source",
                             "error": 0.0 if ok else 1.0, "tolerance": 0.0,
                             "checked": args.n, "message": ""},
              "samples_s": samples, "units_per_sample": args.reps, "warmup_runs": args.warmup,
              "stats": stats, "metrics": {"bytes": moved, "gbps": moved / stats["median_s"] / 1e9}}
    write_report(args, started, [plain_backend(backend)], [result])
    print(f"{backend} {workload}: {moved / stats['median_s'] / 1e9:.0f} GB/s "
          f"(median {stats['median_s'] * 1e3:.3f} ms)", file=sys.stderr)
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    bench = sub.add_parser("resnet50")
    bench.add_argument("--batch", type=int, default=32)
    bench.add_argument("--image", type=int, default=224)
    bench.add_argument("--width", type=int, default=64)
    bench.add_argument("--classes", type=int, default=1000)
    bench.add_argument("--threads", type=int, default=os.cpu_count())
    bench.add_argument("--steps", type=int, default=5)
    bench.add_argument("--warmup", type=int, default=2)
    bench.add_argument("--lr", type=float)
    bench.add_argument("--dtype", choices=["f32", "tf32", "bf16", "f16"], default="f32",
                       help="bf16 / f16: autocast (mixed precision; f16 with GradScaler), as "
                            "trainbench's dtype; tf32 and f16 need --cuda")
    bench.add_argument("--seed", type=int, default=42)
    bench.add_argument("--formats", default="contiguous,channels_last")
    bench.add_argument("--cuda", action="store_true")
    bench.add_argument("--peak-from", help="trainbench report whose cpu-onednn fp32 peak to use")
    bench.add_argument("-o", "--output", required=True)
    bert = sub.add_parser("bert")
    bert.add_argument("--model", choices=sorted(BERT_CONFIGS), default="base")
    bert.add_argument("--batch", type=int, default=8)
    bert.add_argument("--seq", type=int, default=128)
    bert.add_argument("--optimizer", choices=["adamw", "lamb"], default="adamw")
    bert.add_argument("--dropout", type=float, default=0.1)
    bert.add_argument("--lr", type=float, help="default: 1e-4 for AdamW, 2e-3 for LAMB")
    bert.add_argument("--dtype", choices=["f32", "tf32", "bf16", "f16"], default="f32")
    bert.add_argument("--attention", choices=["unfused", "fused"], default="unfused",
                      help="fused: scaled_dot_product_attention, no dropout on the probabilities")
    bert.add_argument("--threads", type=int, default=os.cpu_count())
    bert.add_argument("--steps", type=int, default=5)
    bert.add_argument("--warmup", type=int, default=2)
    bert.add_argument("--seed", type=int, default=42)
    bert.add_argument("--cuda", action="store_true")
    bert.add_argument("--peak-from", help="trainbench report whose cpu-onednn peak to use")
    bert.add_argument("-o", "--output", required=True)
    step = sub.add_parser("resnet50-step")
    step.add_argument("--state", required=True)
    step.add_argument("--batch", required=True)
    step.add_argument("--width", type=int, default=64)
    step.add_argument("--classes", type=int, default=1000)
    step.add_argument("--threads", type=int, default=os.cpu_count())
    step.add_argument("--double", action="store_true")
    step.add_argument("-o", "--output", required=True)
    ttt = sub.add_parser("fashion-mnist")
    ttt.add_argument("--target", type=float, default=0.90)
    ttt.add_argument("--batch", type=int, default=128)
    ttt.add_argument("--epochs", type=int, default=3)
    ttt.add_argument("--lr", type=float, default=0.1)
    ttt.add_argument("--runs", type=int, default=1)
    ttt.add_argument("--dtype", choices=["f32", "tf32", "bf16", "f16"], default="f32",
                     help="tf32 and f16 need --cuda")
    ttt.add_argument("--cuda", action="store_true")
    ttt.add_argument("--threads", type=int, default=os.cpu_count())
    ttt.add_argument("--seed", type=int, default=42)
    ttt.add_argument("-o", "--output", required=True)
    bert_one = sub.add_parser("bert-step")
    bert_one.add_argument("--state", required=True)
    bert_one.add_argument("--batch", required=True)
    bert_one.add_argument("--model", choices=sorted(BERT_CONFIGS), default="tiny")
    bert_one.add_argument("--threads", type=int, default=os.cpu_count())
    bert_one.add_argument("--double", action="store_true")
    bert_one.add_argument("-o", "--output", required=True)
    matmul = sub.add_parser("matmul")
    matmul.add_argument("--m", type=int, default=8192)
    matmul.add_argument("--n", type=int)
    matmul.add_argument("--k", type=int)
    matmul.add_argument("--dtype", choices=["f32", "tf32", "bf16", "f16"], default="bf16")
    matmul.add_argument("--reps", type=int, default=10)
    matmul.add_argument("--threads", type=int, default=os.cpu_count())
    matmul.add_argument("--steps", type=int, default=10)
    matmul.add_argument("--warmup", type=int, default=2)
    matmul.add_argument("--seed", type=int, default=42)
    matmul.add_argument("--cuda", action="store_true")
    matmul.add_argument("-o", "--output", required=True)
    copy = sub.add_parser("copy")
    copy.add_argument("--n", type=lambda text: int(text[:-2]) << 20 if text.endswith("Mi")
                      else int(text), default=256 << 20, help="elements (fp64); 256Mi: 2 GiB")
    copy.add_argument("--reps", type=int, default=10)
    copy.add_argument("--threads", type=int, default=os.cpu_count())
    copy.add_argument("--steps", type=int, default=10)
    copy.add_argument("--warmup", type=int, default=2)
    copy.add_argument("--seed", type=int, default=42)
    copy.add_argument("--cuda", action="store_true")
    copy.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    commands = {"copy": copy_bench, "resnet50": resnet50_bench, "bert": bert_bench, "resnet50-step": resnet50_step,
                "bert-step": bert_step, "fashion-mnist": fashion_mnist_bench,
                "matmul": matmul_bench}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
