#!/usr/bin/env python3
"""Cross-check derive_shapes.py against real forward passes in PyTorch.

Three sources are compared, model by model, as multisets of shape keys:

1. derive_shapes.py's compact descriptions (what shape_priors.json is built from);
2. torch.nn models written here (independently of derive_shapes.py, in the
   module-class style of the usual reference implementations), run on a random
   input of the standard size at batch 1; every conv2d / linear / matmul call is
   recorded by a TorchFunctionMode, so spatial sizes and channel counts come from
   real tensors (a wrong channel count would crash, a wrong size would show);
3. optional external references, when their sources are available:
   torchvision's model definitions (--torchvision-src: the `torchvision` package
   folder from an unpacked torchvision wheel; loaded as a bare package without its
   C extension, which only the detection ops need) and HuggingFace transformers'
   BertModel / GPT2LMHeadModel built from their default configs with random
   weights (--hf-path: a folder that holds `transformers` and its dependencies,
   e.g. from `pip install --target DIR transformers`). No weights are downloaded.

Usage: python crosscheck_torch.py [--torchvision-src DIR] [--hf-path DIR]
Exit status 0 when every available comparison matches exactly.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import types
from collections import Counter
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as Fn
from torch.overrides import TorchFunctionMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
import derive_shapes  # noqa: E402

# ----------------------------------------------------------------------------
# Recorder
# ----------------------------------------------------------------------------

_WATCH_UNHANDLED = {"einsum", "baddbmm", "scaled_dot_product_attention", "conv1d", "conv3d",
                    "conv_transpose2d", "tensordot", "dot", "mv", "addbmm", "chain_matmul"}


def _p2(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class Recorder(TorchFunctionMode):
    """Records conv2d / linear / addmm / mm / matmul / bmm calls as derive_shapes keys."""

    def __init__(self):
        super().__init__()
        self.keys: Counter = Counter()
        self.unhandled: Counter = Counter()

    def _mm(self, a_shape, b_shape):
        # (..., M, K) @ (..., K, N): one matmul per leading (batch, head) index
        *ba, M, K = a_shape
        *bb, K2, N = b_shape
        assert K == K2, (a_shape, b_shape)
        batch = torch.broadcast_shapes(torch.Size(ba), torch.Size(bb))
        self.keys[("matmul", M, N, K)] += math.prod(batch)

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "conv2d":
            x, w = args[0], args[1]
            stride = kwargs.get("stride", args[3] if len(args) > 3 else 1)
            pad = kwargs.get("padding", args[4] if len(args) > 4 else 0)
            dil = kwargs.get("dilation", args[5] if len(args) > 5 else 1)
            groups = kwargs.get("groups", args[6] if len(args) > 6 else 1)
            assert not isinstance(pad, str), "string padding not expected"
            assert _p2(dil) == (1, 1)
            sh, sw = _p2(stride)
            assert sh == sw
            N, C, H, W = x.shape
            F, _, R, S = w.shape
            self.keys[("conv2d", N, C, H, W, F, R, S, sh, _p2(pad), groups)] += 1
        elif name == "linear":
            x, w = args[0], args[1]
            self.keys[("matmul", math.prod(x.shape[:-1]), w.shape[0], w.shape[1])] += 1
        elif name in ("addmm",):
            self._mm(tuple(args[1].shape), tuple(args[2].shape))
        elif name in ("mm", "matmul", "bmm", "__matmul__"):
            a, b = args[0], args[1]
            assert a.dim() >= 2 and b.dim() >= 2, "vector matmul not expected"
            self._mm(tuple(a.shape), tuple(b.shape))
        elif name in _WATCH_UNHANDLED:
            self.unhandled[name] += 1
        return func(*args, **kwargs)


def trace(model: nn.Module, inp: torch.Tensor) -> Counter:
    model.eval()
    rec = Recorder()
    with torch.no_grad(), rec:
        model(inp)
    assert not rec.unhandled, f"unhandled ops: {dict(rec.unhandled)}"
    return rec.keys


def img(size):
    return torch.randn(1, 3, size, size)


def tokens(seq):
    return torch.zeros(1, seq, dtype=torch.long)


# ----------------------------------------------------------------------------
# Own torch.nn definitions (independent of derive_shapes.py)
# ----------------------------------------------------------------------------

def cbr(cin, cout, k, s=1, p=0, g=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, p, groups=g, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, width, stride, v15=None):
        super().__init__()
        self.c1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(width)
        self.c2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(width)
        self.down = None
        if stride != 1 or cin != width:
            self.down = nn.Sequential(nn.Conv2d(cin, width, 1, stride, bias=False), nn.BatchNorm2d(width))

    def forward(self, x):
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        return torch.relu(y + (self.down(x) if self.down is not None else x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride, v15):
        super().__init__()
        out = width * 4
        s1, s2 = (1, stride) if v15 else (stride, 1)
        self.c1 = nn.Conv2d(cin, width, 1, s1, bias=False)
        self.c2 = nn.Conv2d(width, width, 3, s2, 1, bias=False)
        self.c3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn = nn.ModuleList([nn.BatchNorm2d(width), nn.BatchNorm2d(width), nn.BatchNorm2d(out)])
        self.down = None
        if stride != 1 or cin != out:
            self.down = nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        y = torch.relu(self.bn[0](self.c1(x)))
        y = torch.relu(self.bn[1](self.c2(y)))
        y = self.bn[2](self.c3(y))
        return torch.relu(y + (self.down(x) if self.down is not None else x))


class ResNet(nn.Module):
    def __init__(self, block, layers, v15=False):
        super().__init__()
        self.stem = nn.Sequential(cbr(3, 64, 7, 2, 3), nn.MaxPool2d(3, 2, 1))
        cin, stages = 64, []
        for i, (w, n) in enumerate(zip([64, 128, 256, 512], layers)):
            blocks = []
            for j in range(n):
                blocks.append(block(cin, w, 2 if (i > 0 and j == 0) else 1, v15))
                cin = w * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, 1000)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(Fn.adaptive_avg_pool2d(x, 1), 1))


class InvRes(nn.Module):
    def __init__(self, cin, cout, stride, t):
        super().__init__()
        hid = cin * t
        layers = [] if t == 1 else [cbr(cin, hid, 1)]
        layers += [cbr(hid, hid, 3, stride, 1, g=hid), nn.Conv2d(hid, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.res = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.res else self.body(x)


class MobileNetV2(nn.Module):
    def __init__(self):
        super().__init__()
        feats, cin = [cbr(3, 32, 3, 2, 1)], 32
        for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
            for i in range(n):
                feats.append(InvRes(cin, c, s if i == 0 else 1, t))
                cin = c
        feats.append(cbr(cin, 1280, 1))
        self.features = nn.Sequential(*feats)
        self.classifier = nn.Linear(1280, 1000)

    def forward(self, x):
        return self.classifier(torch.flatten(Fn.adaptive_avg_pool2d(self.features(x), 1), 1))


class VGG16(nn.Module):
    def __init__(self):
        super().__init__()
        layers, cin = [], 3
        for n, w in [(2, 64), (2, 128), (3, 256), (3, 512), (3, 512)]:
            for _ in range(n):
                layers += [nn.Conv2d(cin, w, 3, padding=1), nn.ReLU(inplace=True)]
                cin = w
            layers.append(nn.MaxPool2d(2, 2))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(512 * 7 * 7, 4096), nn.ReLU(), nn.Linear(4096, 4096),
                                        nn.ReLU(), nn.Linear(4096, 1000))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class DenseLayer(nn.Module):
    def __init__(self, cin, k=32, bn=4):
        super().__init__()
        self.f = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, bn * k, 1, bias=False),
                               nn.BatchNorm2d(bn * k), nn.ReLU(), nn.Conv2d(bn * k, k, 3, padding=1, bias=False))

    def forward(self, x):
        return torch.cat([x, self.f(x)], 1)


class DenseNet121(nn.Module):
    def __init__(self):
        super().__init__()
        mods, c = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)], 64
        for i, n in enumerate([6, 12, 24, 16]):
            for _ in range(n):
                mods.append(DenseLayer(c))
                c += 32
            if i < 3:
                mods += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2, 2)]
                c //= 2
        self.features = nn.Sequential(*mods, nn.BatchNorm2d(c), nn.ReLU())
        self.classifier = nn.Linear(c, 1000)

    def forward(self, x):
        return self.classifier(torch.flatten(Fn.adaptive_avg_pool2d(self.features(x), 1), 1))


class IncA(nn.Module):
    def __init__(self, cin, pf):
        super().__init__()
        self.b1 = cbr(cin, 64, 1)
        self.b5 = nn.Sequential(cbr(cin, 48, 1), cbr(48, 64, 5, 1, 2))
        self.b3 = nn.Sequential(cbr(cin, 64, 1), cbr(64, 96, 3, 1, 1), cbr(96, 96, 3, 1, 1))
        self.bp = cbr(cin, pf, 1)

    def forward(self, x):
        return torch.cat([self.b1(x), self.b5(x), self.b3(x), self.bp(Fn.avg_pool2d(x, 3, 1, 1))], 1)


class IncB(nn.Module):
    def __init__(self, cin):
        super().__init__()
        self.b3 = cbr(cin, 384, 3, 2)
        self.bd = nn.Sequential(cbr(cin, 64, 1), cbr(64, 96, 3, 1, 1), cbr(96, 96, 3, 2))

    def forward(self, x):
        return torch.cat([self.b3(x), self.bd(x), Fn.max_pool2d(x, 3, 2)], 1)


class IncC(nn.Module):
    def __init__(self, cin, c7):
        super().__init__()
        self.b1 = cbr(cin, 192, 1)
        self.b7 = nn.Sequential(cbr(cin, c7, 1), cbr(c7, c7, (1, 7), 1, (0, 3)), cbr(c7, 192, (7, 1), 1, (3, 0)))
        self.bd = nn.Sequential(cbr(cin, c7, 1), cbr(c7, c7, (7, 1), 1, (3, 0)), cbr(c7, c7, (1, 7), 1, (0, 3)),
                                cbr(c7, c7, (7, 1), 1, (3, 0)), cbr(c7, 192, (1, 7), 1, (0, 3)))
        self.bp = cbr(cin, 192, 1)

    def forward(self, x):
        return torch.cat([self.b1(x), self.b7(x), self.bd(x), self.bp(Fn.avg_pool2d(x, 3, 1, 1))], 1)


class IncD(nn.Module):
    def __init__(self, cin):
        super().__init__()
        self.b3 = nn.Sequential(cbr(cin, 192, 1), cbr(192, 320, 3, 2))
        self.b7 = nn.Sequential(cbr(cin, 192, 1), cbr(192, 192, (1, 7), 1, (0, 3)),
                                cbr(192, 192, (7, 1), 1, (3, 0)), cbr(192, 192, 3, 2))

    def forward(self, x):
        return torch.cat([self.b3(x), self.b7(x), Fn.max_pool2d(x, 3, 2)], 1)


class IncE(nn.Module):
    def __init__(self, cin):
        super().__init__()
        self.b1 = cbr(cin, 320, 1)
        self.b3 = cbr(cin, 384, 1)
        self.b3a, self.b3b = cbr(384, 384, (1, 3), 1, (0, 1)), cbr(384, 384, (3, 1), 1, (1, 0))
        self.bd = nn.Sequential(cbr(cin, 448, 1), cbr(448, 384, 3, 1, 1))
        self.bda, self.bdb = cbr(384, 384, (1, 3), 1, (0, 1)), cbr(384, 384, (3, 1), 1, (1, 0))
        self.bp = cbr(cin, 192, 1)

    def forward(self, x):
        y3, yd = self.b3(x), self.bd(x)
        return torch.cat([self.b1(x), self.b3a(y3), self.b3b(y3), self.bda(yd), self.bdb(yd),
                          self.bp(Fn.avg_pool2d(x, 3, 1, 1))], 1)


class InceptionV3(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(cbr(3, 32, 3, 2), cbr(32, 32, 3), cbr(32, 64, 3, 1, 1), nn.MaxPool2d(3, 2),
                                  cbr(64, 80, 1), cbr(80, 192, 3), nn.MaxPool2d(3, 2))
        self.body = nn.Sequential(IncA(192, 32), IncA(256, 64), IncA(288, 64), IncB(288),
                                  IncC(768, 128), IncC(768, 160), IncC(768, 160), IncC(768, 192),
                                  IncD(768), IncE(1280), IncE(2048))
        self.fc = nn.Linear(2048, 1000)

    def forward(self, x):
        return self.fc(torch.flatten(Fn.adaptive_avg_pool2d(self.body(self.stem(x)), 1), 1))


class SelfAttention(nn.Module):
    def __init__(self, d, h, fused):
        super().__init__()
        self.h, self.fused = h, fused
        if fused:
            self.qkv = nn.Linear(d, 3 * d)
        else:
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.o = nn.Linear(d, d)

    def forward(self, x, causal):
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, -1) if self.fused else (self.q(x), self.k(x), self.v(x))
        q, k, v = (t.view(B, T, self.h, D // self.h).transpose(1, 2) for t in (q, k, v))
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D // self.h)
        if causal:
            att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        y = torch.matmul(att.softmax(-1), v)
        return self.o(y.transpose(1, 2).reshape(B, T, D))


class TBlock(nn.Module):
    def __init__(self, d=768, h=12, ff=3072, gpt=False):
        super().__init__()
        self.gpt = gpt
        self.attn = SelfAttention(d, h, fused=gpt)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.up, self.down = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        if self.gpt:  # pre-LN, causal
            x = x + self.attn(self.ln1(x), True)
            return x + self.down(Fn.gelu(self.up(self.ln2(x))))
        x = self.ln1(x + self.attn(x, False))  # post-LN, bidirectional
        return self.ln2(x + self.down(Fn.gelu(self.up(x))))


class Bert(nn.Module):
    def __init__(self, vocab=30522, d=768, L=12):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(512, d)
        self.layers = nn.ModuleList([TBlock() for _ in range(L)])
        self.pooler = nn.Linear(d, d)

    def forward(self, ids):
        x = self.emb(ids) + self.pos(torch.arange(ids.shape[1]))
        for blk in self.layers:
            x = blk(x)
        return torch.tanh(self.pooler(x[:, 0]))


class GPT2(nn.Module):
    def __init__(self, vocab=50257, d=768, L=12, ctx=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.layers = nn.ModuleList([TBlock(gpt=True) for _ in range(L)])
        self.lnf = nn.LayerNorm(d)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for blk in self.layers:
            x = blk(x)
        return Fn.linear(self.lnf(x), self.wte.weight)  # tied LM head


OWN = {
    "ResNet-18": lambda: (ResNet(BasicBlock, [2, 2, 2, 2]), img(224)),
    "ResNet-50": lambda: (ResNet(Bottleneck, [3, 4, 6, 3], v15=False), img(224)),
    "ResNet-50-v1.5": lambda: (ResNet(Bottleneck, [3, 4, 6, 3], v15=True), img(224)),
    "MobileNet-V2": lambda: (MobileNetV2(), img(224)),
    "VGG-16": lambda: (VGG16(), img(224)),
    "Inception-v3": lambda: (InceptionV3(), img(299)),
    "DenseNet-121": lambda: (DenseNet121(), img(224)),
    "BERT-base/seq128": lambda: (Bert(), tokens(128)),
    "BERT-base/seq512": lambda: (Bert(), tokens(512)),
    "GPT-2-small/seq128": lambda: (GPT2(), tokens(128)),
    "GPT-2-small/seq512": lambda: (GPT2(), tokens(512)),
    "GPT-2-small/seq1024": lambda: (GPT2(), tokens(1024)),
}


# ----------------------------------------------------------------------------
# External references (optional)
# ----------------------------------------------------------------------------

def torchvision_models(src: str):
    pkg = types.ModuleType("torchvision")  # bare package: skip torchvision/__init__ (C ops)
    pkg.__path__ = [src]
    sys.modules["torchvision"] = pkg
    import warnings
    warnings.filterwarnings("ignore")
    import torchvision.models as tvm  # noqa: E402

    return {
        "ResNet-18": lambda: (tvm.resnet18(), img(224)),
        "ResNet-50-v1.5": lambda: (tvm.resnet50(), img(224)),
        "MobileNet-V2": lambda: (tvm.mobilenet_v2(), img(224)),
        "VGG-16": lambda: (tvm.vgg16(), img(224)),
        "Inception-v3": lambda: (tvm.inception_v3(init_weights=False, aux_logits=True), img(299)),
        "DenseNet-121": lambda: (tvm.densenet121(), img(224)),
    }


def hf_models(path: str):
    sys.path.insert(0, path)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    bert = lambda s: (BertModel(BertConfig(attn_implementation="eager")), tokens(s))  # noqa: E731
    gpt = lambda s: (GPT2LMHeadModel(GPT2Config(attn_implementation="eager")), tokens(s))  # noqa: E731
    out = {f"BERT-base/seq{s}": (lambda s=s: bert(s)) for s in (128, 512)}
    out.update({f"GPT-2-small/seq{s}": (lambda s=s: gpt(s)) for s in (128, 512, 1024)})
    return out


# ----------------------------------------------------------------------------

def derived() -> dict[str, Counter]:
    out = {}
    for name, builder, _ in derive_shapes.MODELS:
        net = builder()
        out[name] = Counter(k for k, _ in net.convs + net.matmuls)
    return out


def compare(label, ref: Counter, got: Counter) -> tuple[bool, str]:
    if ref == got:
        n_c = sum(v for k, v in got.items() if k[0] == "conv2d")
        n_m = sum(v for k, v in got.items() if k[0] == "matmul")
        return True, f"OK   {label}: {n_c} conv2d + {n_m} matmul instances, {len(got)} distinct, identical"
    lines = [f"DIFF {label}:"]
    for k in sorted(set(ref) | set(got), key=str):
        if ref[k] != got[k]:
            lines.append(f"     {k}: derive_shapes={ref[k]} torch={got[k]}")
    return False, "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torchvision-src", help="path of an unpacked wheel's torchvision/ folder")
    ap.add_argument("--hf-path", help="folder with transformers importable (pip install --target)")
    ap.add_argument("--report", default="crosscheck_report.txt")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    ref = derived()
    ok, lines = True, [f"torch {torch.__version__}"]

    sources = [("own torch.nn", OWN)]
    # transformers first: it probes for torchvision at import and trips on the bare stub package
    if args.hf_path:
        hf = ("transformers " + _hf_version(args.hf_path), hf_models(args.hf_path))
    if args.torchvision_src:
        sources.append(("torchvision " + _version(args.torchvision_src), torchvision_models(args.torchvision_src)))
    if args.hf_path:
        sources.append(hf)
    for src_name, models in sources:
        lines.append(f"== derive_shapes.py vs {src_name}")
        for name, make in models.items():
            model, inp = make()
            good, msg = compare(f"{name} [{src_name}]", ref[name], trace(model, inp))
            ok &= good
            lines.append(msg)
            print(msg, flush=True)
    missing = [n for n in ref if n not in OWN]
    if missing:
        lines.append(f"not cross-checked: {missing}")
    lines.append("ALL MATCH" if ok else "MISMATCHES FOUND")
    Path(args.report).write_text("\n".join(lines) + "\n")
    print(lines[-1])
    return 0 if ok else 1


def _version(src):
    for d in Path(src).parent.glob("torchvision-*.dist-info"):
        return d.name.split("-")[1].replace(".dist", "")
    return "(unknown version)"


def _hf_version(path):
    for d in Path(path).glob("transformers-*.dist-info"):
        return d.name.split("-")[1].replace(".dist", "")
    return "(unknown version)"


if __name__ == "__main__":
    sys.exit(main())
