#!/usr/bin/env python3
"""torch.compile(backend="tessel") on a torchvision ResNet and a transformers
BERT (random weights: nothing is downloaded), timed in one run against eager
PyTorch and torch.compile's default backend (Inductor), with the outputs
checked against eager.

    build/pyenv/bin/python examples/torch_compile.py --model resnet18 --batch 1
    build/pyenv/bin/python examples/torch_compile.py --model bert --seq 128

Times are medians of --iters calls after warm-up, in this process, with the
same inputs for every backend; the threads of all three are set to --threads.
"""
import argparse
import statistics
import time

import torch

import tessel.torch_backend


def resnet18(batch):
    import torchvision

    m = torchvision.models.resnet18(weights=None).eval()
    return m, (torch.randn(batch, 3, 224, 224),)


def bert(batch, seq):
    from transformers import BertConfig, BertModel

    cfg = BertConfig(attn_implementation="sdpa")  # bert-base sizes, random weights
    m = BertModel(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.int64)

    class Encoder(torch.nn.Module):  # the hidden states, as a plain tensor
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    return Encoder().eval(), (ids, mask)


def median_ms(fn, args, warmup, iters):
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["resnet18", "bert"], default="resnet18")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--no-inductor", action="store_true", help="skip Inductor (its compile takes minutes here)")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    model, args = resnet18(a.batch) if a.model == "resnet18" else bert(a.batch, a.seq)
    backends = {"eager": model,
                "tessel": torch.compile(model, backend="tessel", options={"threads": a.threads})}
    if not a.no_inductor:
        backends["inductor"] = torch.compile(model)
    with torch.inference_mode():
        want = model(*args)
        results = {}
        for name, fn in backends.items():
            t0 = time.perf_counter()
            got = fn(*args)  # the first call compiles
            first = time.perf_counter() - t0
            err = ((got - want).norm() / want.norm()).item()
            results[name] = (first, err)
        times = {name: [] for name in backends}
        for _ in range(3):  # rounds alternate the backends, so that drift hits all alike
            for name, fn in backends.items():
                times[name].append(median_ms(fn, args, a.warmup, a.iters))
    print(f"{a.model} batch {a.batch}" + (f" seq {a.seq}" if a.model == "bert" else "") + f", {a.threads} threads")
    eager = statistics.median(times["eager"])
    for name in backends:
        ms = statistics.median(times[name])
        first, err = results[name]
        print(f"  {name:<9} {ms:9.2f} ms  ({eager / ms:4.2f}x eager)  first call {first:6.1f} s  "
              f"rel. L2 vs eager {err:.1e}")
    print("tessel:", {k: v for k, v in tessel.torch_backend.stats().items() if k in ("compiles", "partitions")},
          "fallback ops:", tessel.torch_backend.stats().get("fallback_ops", {}) or "none")


if __name__ == "__main__":
    main()
