#!/usr/bin/env python3
"""PyTorch doing the same work as trainbench's model workloads, for side-by-side figures.

  pytorch_reference.py resnet50 [--batch 32] [--image 224] [--width 64] [--classes 1000]
      [--dtype f32|bf16] [--threads N] [--steps 5] [--warmup 2] [--cuda]
      [--formats contiguous,channels_last]
      [--peak-from trainbench-report.json] -o report.json
    Times whole training steps (forward, loss, backward, SGD momentum) of torchvision's
    resnet50 on a fixed batch of seeded random images, once per memory format, and writes
    the figures in trainbench's report schema: backend pytorch-cpu (or pytorch-cuda) with the
    memory format as a variant, and the same workload line as trainbench's
    `resnet50-train` with direct convolutions (what PyTorch runs), so
    `trainbench compare --across-backends` puts them side by side.

  pytorch_reference.py resnet50-step --state STATE --batch BATCH --width W --classes C -o OUT
    One forward and backward (no update) from trainbench's saved state and batch
    (safetensors files); writes the loss and every parameter gradient to OUT, for trainbench's
    test to compare.

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

        # bf16: autocast, PyTorch's mixed precision (fp32 master weights and optimizer).
        autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                                  enabled=args.dtype == "bf16")

        def step():
            optimizer.zero_grad(set_to_none=False)
            with autocast:
                loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            return loss

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
        ok = parameters == expected and all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
        stats = summarize(samples)
        gflops = flops_per_image * args.batch / stats["median_s"] / 1e9
        metrics = {"flops": flops_per_image * args.batch, "tflops": gflops / 1e3,
                   "samples_per_s": args.batch / stats["median_s"]}
        if peak:
            metrics["percent_of_peak"] = 100 * gflops / peak
        name = f"{backend}[memory_format={memory_format}]"
        details = {"model": "torchvision resnet50", "parameters": parameters,
                   "torchvision_parameters": expected, "memory_format": memory_format,
                   "threads": torch.get_num_threads(), "torch_version": torch.__version__,
                   "allocator": {"LD_PRELOAD": os.environ.get("LD_PRELOAD", ""),
                                 "MALLOC_CONF": os.environ.get("MALLOC_CONF", "")},
                   "mkldnn_enabled": torch.backends.mkldnn.enabled,
                   "parallel_info": torch.__config__.parallel_info(), "losses": losses,
                   "peak_source": args.peak_from or ""}
        backends.append({"name": name, "variant_of": backend, "environment": environment(),
                         "available": True, "reason": "", "device": None,
                         "peaks": {args.dtype: {"measured_gflops": peak, "theoretical_gflops": None,
                                           "reason": "taken from the trainbench report given"
                                           if peak else "not measured by this runner"}}})
        results.append({"workload": workload, "backend": name, "dtype": args.dtype,
                        "status": "passed" if ok else "failed",
                        "reason": "" if ok else f"parameters {parameters} vs {expected}, losses {losses}",
                        "implementation": f"PyTorch {torch.__version__} eager, {memory_format}"
                        + (", bf16 autocast" if args.dtype == "bf16" else ""),
                        "math_mode": "strict" if args.dtype == "f32"
                        else "bf16 inputs, fp32 accumulation", "details": details,
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
    report = {"schema_version": 1,
              "tool": {"name": "pytorch_reference", "version": "0.1.0",
                       "git_commit": "", "build_type": ""},
              "command": " ".join(sys.argv), "started_at": started,
              "finished_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "settings": {"threads": args.threads, "pin": "none", "seed": args.seed,
                           "suite": None, "warmup_runs": args.warmup, "warmup_seconds": 0.0,
                           "min_repetitions": args.steps, "max_repetitions": args.steps,
                           "time_budget_seconds": 0.0, "min_sample_seconds": 0.0},
              "host": host_section(), "backends": backends, "results": results}
    tmp = args.output + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, args.output)
    return 0 if all(r["status"] == "passed" for r in results) else 1


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
    loss.backward()
    out = {"loss": loss.detach().reshape(1)}
    for name, parameter in model.named_parameters():
        out[name] = parameter.grad
    write_safetensors(args.output, out)
    return 0


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
    bench.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                       help="bf16: autocast (mixed precision), as trainbench's dtype=bf16")
    bench.add_argument("--seed", type=int, default=42)
    bench.add_argument("--formats", default="contiguous,channels_last")
    bench.add_argument("--cuda", action="store_true")
    bench.add_argument("--peak-from", help="trainbench report whose cpu-onednn fp32 peak to use")
    bench.add_argument("-o", "--output", required=True)
    step = sub.add_parser("resnet50-step")
    step.add_argument("--state", required=True)
    step.add_argument("--batch", required=True)
    step.add_argument("--width", type=int, default=64)
    step.add_argument("--classes", type=int, default=1000)
    step.add_argument("--threads", type=int, default=os.cpu_count())
    step.add_argument("--double", action="store_true")
    step.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    return resnet50_bench(args) if args.command == "resnet50" else resnet50_step(args)


if __name__ == "__main__":
    sys.exit(main())
