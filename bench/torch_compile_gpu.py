#!/usr/bin/env python3
"""torch.compile(backend="tessel") on the GPU in bf16 against Inductor with
mode="reduce-overhead" (CUDA graphs) and eager PyTorch, measured in one run.

Five models with random weights (torchvision and transformers constructors:
nothing is downloaded), cast to bf16 on cuda:0: ResNet-18 and MobileNet-V2
(224x224), BERT-base, GPT-2 (12 layers) and a Llama-style decoder (8 layers,
hidden 1024, grouped KV heads) at sequence 128.

    python3 bench/torch_compile_gpu.py [--only resnet18,bert] [--batch 1] [--json out.json]

Each figure is the median over rounds of one block: --iters calls back to
back, then torch.cuda.synchronize(), divided by --iters (how a PyTorch program
issues work). Rounds alternate the backends so that drift hits all alike. The
accuracy column is the relative L2 error against eager fp32 on the same
weights; eager bf16's own error is printed beside it.
"""
import argparse
import json
import statistics
import time

import torch

import tessel.torch_backend


def resnet18(batch, seq):
    import torchvision
    return torchvision.models.resnet18(weights=None), (torch.randn(batch, 3, 224, 224),)


def mobilenet_v2(batch, seq):
    import torchvision
    return torchvision.models.mobilenet_v2(weights=None), (torch.randn(batch, 3, 224, 224),)


class Hidden(torch.nn.Module):
    """A transformers model's last hidden state as a plain tensor."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids, mask):
        return self.m(input_ids=ids, attention_mask=mask).last_hidden_state


def tokens(batch, seq, vocab):
    return torch.randint(0, vocab, (batch, seq)), torch.ones(batch, seq, dtype=torch.int64)


def bert(batch, seq):
    from transformers import BertConfig, BertModel
    cfg = BertConfig(attn_implementation="sdpa")
    return Hidden(BertModel(cfg, add_pooling_layer=False)), tokens(batch, seq, cfg.vocab_size)


def gpt2(batch, seq):
    from transformers import GPT2Config, GPT2Model
    cfg = GPT2Config(use_cache=False, attn_implementation="sdpa")
    return Hidden(GPT2Model(cfg)), tokens(batch, seq, cfg.vocab_size)


def llama(batch, seq):
    from transformers import LlamaConfig, LlamaModel
    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                      num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=512, use_cache=False,
                      attn_implementation="sdpa")
    return Hidden(LlamaModel(cfg)), tokens(batch, seq, cfg.vocab_size)


MODELS = {"resnet18": resnet18, "mobilenet_v2": mobilenet_v2, "bert": bert, "gpt2": gpt2, "llama": llama}


def block_ms(fn, args, iters):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e3


def rel_l2(got, want):
    got, want = got.float(), want.float()
    return ((got - want).norm() / want.norm()).item()


def bench(name, a):
    torch.manual_seed(0)
    model, args = MODELS[name](a.batch, a.seq)
    model = model.eval().cuda()
    args = tuple(x.cuda() for x in args)
    with torch.inference_mode():
        ref = model(*args)  # fp32
        model = model.to(torch.bfloat16)
        args = tuple(x.to(torch.bfloat16) if x.is_floating_point() else x for x in args)
        backends = {"eager": model,
                    "tessel": torch.compile(model, backend="tessel"),
                    "inductor-ro": torch.compile(model, mode="reduce-overhead")}
        first, err = {}, {}
        for b, fn in backends.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = fn(*args)
            torch.cuda.synchronize()
            first[b] = time.perf_counter() - t0
            err[b] = rel_l2(out, ref)
            for _ in range(a.warmup):
                fn(*args)
        times = {b: [] for b in backends}
        for _ in range(a.rounds):
            for b, fn in backends.items():
                times[b].append(block_ms(fn, args, a.iters))
    med = {b: statistics.median(t) for b, t in times.items()}
    return {"model": name, "batch": a.batch, "seq": a.seq, "ms": med, "first_call_s": first, "rel_l2_vs_fp32": err,
            "tessel_stats": {k: v for k, v in tessel.torch_backend.stats().items()
                             if k in ("compiles", "partitions", "fallback_ops", "eager_graphs")}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(MODELS))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; bf16, batch {a.batch}", flush=True)
    print(f"{'model':<14}{'eager ms':>10}{'tessel ms':>11}{'inductor-ro ms':>16}{'tessel/ind':>12}"
          f"{'first call s (t/i)':>20}{'rel L2 t/i/eager':>26}")
    rows = []
    for name in a.only.split(","):
        tessel.torch_backend.reset_stats()
        torch._dynamo.reset()
        r = bench(name, a)
        rows.append(r)
        ms, f, e = r["ms"], r["first_call_s"], r["rel_l2_vs_fp32"]
        print(f"{name:<14}{ms['eager']:>10.3f}{ms['tessel']:>11.3f}{ms['inductor-ro']:>16.3f}"
              f"{ms['tessel'] / ms['inductor-ro']:>12.3f}{f['tessel']:>10.1f}/{f['inductor-ro']:<9.1f}"
              f"{e['tessel']:>10.1e}/{e['inductor-ro']:.1e}/{e['eager']:.1e}  {r['tessel_stats']}", flush=True)
    ratios = [r["ms"]["tessel"] / r["ms"]["inductor-ro"] for r in rows]
    geo = statistics.geometric_mean(ratios)
    print(f"geomean tessel / inductor reduce-overhead: {geo:.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "rows": rows, "geomean_tessel_over_inductor": geo},
                      f, indent=1)


if __name__ == "__main__":
    main()
