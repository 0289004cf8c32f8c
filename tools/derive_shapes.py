#!/usr/bin/env python3
"""Derive a frequency table of conv2d / matmul shapes from published architectures.

Input for seed 004 (One-Shot Tuner) "prior-guided task sampling" (PGS): the paper
crawls model zoos and builds a frequency table of their operator instances; this
script builds that table from compact, hand-written descriptions of the
architectures (no model zoo, no weights, no third-party packages: stdlib only).

Every architecture is walked at batch 1 and its standard inference input:

* CNNs (ImageNet, 224x224; Inception-v3 299x299): every conv2d executed in an
  eval-mode forward pass (Inception-v3's auxiliary classifier is training-only and
  is not run), plus the classifier's fully connected layer(s) as matmuls with
  M = batch = 1.
* Transformers (BERT-base at sequence 128 and 512, GPT-2 small at 128, 512 and
  1024): every dense/linear layer as a matmul with M = batch*seq tokens, N =
  out_features, K = in_features (y[M,N] = x[M,K] @ W^T[K,N]); and the two
  attention products per layer, flattened per (batch, head):
  QK^T is one matmul M=seq, N=seq, K=d_head per head, AV one matmul
  M=seq, N=d_head, K=seq per head, so each layer contributes `heads` occurrences
  of each (a batched matmul of batch B counts B times).

Conv fields follow tensorgym.workloads.Conv2d: N, C (input channels), H, W
(*input* height/width), F (output channels), R, S (kernel height/width), stride,
padding; plus `groups` (depthwise convs have groups == C == F; tensorgym's Conv2d
has no groups yet, so a consumer may skip them). `padding` is an int when it is
the same on both axes, else [pad_h, pad_w] (Inception-v3's 1x7 / 7x1 / 1x3 / 3x1
convs); tensorgym's Conv2d takes one padding, so those rows also carry
"tensorgym_compatible": false. Dilation is 1 everywhere.

Usage:  python tools/derive_shapes.py [--out tensorgym/data/shape_priors.json] [--list]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

# ----------------------------------------------------------------------------
# Recorder: a tiny shape tracer. An activation is a tuple (C, H, W) (batch 1).
# ----------------------------------------------------------------------------


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class Net:
    """Records the conv2d and matmul instances of one architecture."""

    def __init__(self, name: str):
        self.name = name
        self.convs: list[tuple[tuple, str]] = []  # (shape key, role)
        self.matmuls: list[tuple[tuple, str]] = []
        self.matmul_calls: list[tuple] = []  # one per (batched) call, for count_batched

    # -- ops that are recorded ------------------------------------------------
    def conv(self, x, F, k, stride=1, pad=0, groups=1, role="conv"):
        C, H, W = x
        R, S = _pair(k)
        sh, sw = _pair(stride)
        ph, pw = _pair(pad)
        assert sh == sw, "only square strides occur in these models"
        assert C % groups == 0 and F % groups == 0
        OH = (H + 2 * ph - R) // sh + 1
        OW = (W + 2 * pw - S) // sw + 1
        assert OH >= 1 and OW >= 1, (self.name, role, x)
        key = ("conv2d", 1, C, H, W, F, R, S, sh, (ph, pw), groups)
        self.convs.append((key, role))
        return (F, OH, OW)

    def matmul(self, M, N, K, role="matmul", times=1):
        """`times` > 1: a batched matmul (attention heads) flattened into `times` matmuls."""
        self.matmul_calls.append(("matmul", M, N, K))
        for _ in range(times):
            self.matmuls.append((("matmul", M, N, K), role))

    def fc(self, x, out, role="fc"):
        """Classifier dense layer on a flattened activation, batch 1: M = 1."""
        K = x[0] * x[1] * x[2]
        self.matmul(1, out, K, role)
        return (out, 1, 1)

    # -- ops that only change the activation shape (not recorded) -------------
    @staticmethod
    def pool(x, k, stride, pad=0):
        C, H, W = x
        return (C, (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1)

    @staticmethod
    def global_pool(x):
        return (x[0], 1, 1)

    @staticmethod
    def concat(*xs):
        assert len({(x[1], x[2]) for x in xs}) == 1, xs
        return (sum(x[0] for x in xs), xs[0][1], xs[0][2])


# ----------------------------------------------------------------------------
# CNNs
# ----------------------------------------------------------------------------

def resnet_stem(net, x):
    x = net.conv(x, 64, 7, 2, 3, role="stem.conv7x7")
    return net.pool(x, 3, 2, 1)  # max pool 3x3/2, pad 1: 112 -> 56


def resnet_basic(name, blocks):
    """ResNet-18/34 (He et al. 2016, Table 1): two 3x3 convs per block, stride on
    the first; projection shortcut (1x1, stride s) when the shape changes ("B")."""
    net = Net(name)
    x = resnet_stem(net, (3, 224, 224))
    cin = 64
    for stage, (width, n) in enumerate(zip((64, 128, 256, 512), blocks)):
        for b in range(n):
            s = 2 if (stage > 0 and b == 0) else 1
            y = net.conv(x, width, 3, s, 1, role="basic.conv3x3_a")
            y = net.conv(y, width, 3, 1, 1, role="basic.conv3x3_b")
            if s != 1 or cin != width:
                net.conv(x, width, 1, s, 0, role="shortcut.proj1x1")
            x, cin = y, width
    net.fc(net.global_pool(x), 1000)
    return net


def resnet_bottleneck(name, blocks, stride_on_3x3: bool):
    """ResNet-50 (He et al. 2016): bottleneck 1x1 (reduce) - 3x3 - 1x1 (expand x4),
    projection shortcut on the first block of each stage.

    stride_on_3x3=False: the original ResNet v1 (paper / Caffe release, MXNet
    Gluon resnet50_v1): the stride-2 of conv3_1, conv4_1, conv5_1 sits on the
    first 1x1. stride_on_3x3=True: "ResNet v1.5" (torchvision resnet50, NVIDIA,
    MXNet resnet50_v1b): the stride sits on the 3x3."""
    net = Net(name)
    x = resnet_stem(net, (3, 224, 224))
    cin = 64
    for stage, (width, n) in enumerate(zip((64, 128, 256, 512), blocks)):
        for b in range(n):
            s = 2 if (stage > 0 and b == 0) else 1
            s1, s3 = (1, s) if stride_on_3x3 else (s, 1)
            y = net.conv(x, width, 1, s1, 0, role="bottleneck.reduce1x1")
            y = net.conv(y, width, 3, s3, 1, role="bottleneck.conv3x3")
            y = net.conv(y, 4 * width, 1, 1, 0, role="bottleneck.expand1x1")
            if s != 1 or cin != 4 * width:
                net.conv(x, 4 * width, 1, s, 0, role="shortcut.proj1x1")
            x, cin = y, 4 * width
    net.fc(net.global_pool(x), 1000)
    return net


def mobilenet_v2():
    """MobileNetV2 (Sandler et al. 2018, Table 2), width 1.0, 224x224.
    Inverted residual: 1x1 expand (t*Cin; omitted when t == 1), 3x3 depthwise
    (stride s on the first block of each row, pad 1), 1x1 linear projection.
    Head: 1x1 conv 320 -> 1280, global pool, classifier 1280 -> 1000 (the paper
    writes it as a 1x1 conv on a 1x1 map; recorded as a matmul, M = 1)."""
    net = Net("MobileNet-V2")
    x = net.conv((3, 224, 224), 32, 3, 2, 1, role="stem.conv3x3")
    table = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
             (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]  # (t, c, n, s)
    for t, c, n, s in table:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = x[0] * t
            y = x
            if t != 1:
                y = net.conv(y, hidden, 1, 1, 0, role="ir.expand1x1")
            y = net.conv(y, hidden, 3, stride, 1, groups=hidden, role="ir.depthwise3x3")
            x = net.conv(y, c, 1, 1, 0, role="ir.project1x1")
    x = net.conv(x, 1280, 1, 1, 0, role="head.conv1x1")
    net.fc(net.global_pool(x), 1000)
    return net


def vgg16():
    """VGG-16 (Simonyan & Zisserman 2015, configuration D): 13 3x3/1 pad-1 convs,
    2x2/2 max pools, FC 25088-4096-4096-1000."""
    net = Net("VGG-16")
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    x = (3, 224, 224)
    for v in cfg:
        x = net.pool(x, 2, 2) if v == "M" else net.conv(x, v, 3, 1, 1, role="conv3x3")
    x = net.fc(x, 4096, role="fc6")  # 512*7*7 = 25088
    x = net.fc(x, 4096, role="fc7")
    net.fc(x, 1000, role="fc8")
    return net


def densenet121():
    """DenseNet-121 (Huang et al. 2017, Table 1; DenseNet-BC, k = 32, bn_size 4,
    compression 0.5). Dense layer: 1x1 conv to 4k = 128, 3x3 conv to k = 32.
    Transition: 1x1 conv C -> C/2, 2x2/2 average pool. Blocks (6, 12, 24, 16)."""
    net = Net("DenseNet-121")
    k, bn = 32, 4
    x = net.conv((3, 224, 224), 64, 7, 2, 3, role="stem.conv7x7")
    x = net.pool(x, 3, 2, 1)
    for bi, n in enumerate((6, 12, 24, 16)):
        for _ in range(n):
            y = net.conv(x, bn * k, 1, 1, 0, role="dense.conv1x1")
            y = net.conv(y, k, 3, 1, 1, role="dense.conv3x3")
            x = net.concat(x, y)
        if bi != 3:
            x = net.conv(x, x[0] // 2, 1, 1, 0, role="transition.conv1x1")
            x = net.pool(x, 2, 2)
    net.fc(net.global_pool(x), 1000)
    return net


def inception_v3():
    """Inception-v3 (Szegedy et al. 2016, "Rethinking the Inception
    Architecture"), as released (TF-slim inception_v3, also torchvision's and
    Keras'), 299x299. Every conv is a conv-BN-ReLU; pools do not change channels.
    The auxiliary classifier (on the 17x17 grid) runs in training only and is not
    counted."""
    net = Net("Inception-v3")
    c = net.conv
    x = (3, 299, 299)
    x = c(x, 32, 3, 2, 0, role="stem")            # 149
    x = c(x, 32, 3, 1, 0, role="stem")            # 147
    x = c(x, 64, 3, 1, 1, role="stem")            # 147
    x = net.pool(x, 3, 2)                         # 73
    x = c(x, 80, 1, 1, 0, role="stem")            # 73
    x = c(x, 192, 3, 1, 0, role="stem")           # 71
    x = net.pool(x, 3, 2)                         # 35

    def block_a(x, pool_features):  # 35x35 (Mixed_5b/c/d; paper Fig. 5)
        b1 = c(x, 64, 1, role="A.1x1")
        b5 = c(c(x, 48, 1, role="A.5x5_reduce"), 64, 5, 1, 2, role="A.5x5")
        b3 = c(x, 64, 1, role="A.3x3dbl_reduce")
        b3 = c(b3, 96, 3, 1, 1, role="A.3x3dbl_1")
        b3 = c(b3, 96, 3, 1, 1, role="A.3x3dbl_2")
        bp = c(net.pool(x, 3, 1, 1), pool_features, 1, role="A.pool_proj")
        return net.concat(b1, b5, b3, bp)

    def block_b(x):  # 35 -> 17 grid reduction (Mixed_6a)
        b3 = c(x, 384, 3, 2, 0, role="B.3x3_s2")
        bd = c(x, 64, 1, role="B.3x3dbl_reduce")
        bd = c(bd, 96, 3, 1, 1, role="B.3x3dbl_1")
        bd = c(bd, 96, 3, 2, 0, role="B.3x3dbl_2_s2")
        return net.concat(b3, bd, net.pool(x, 3, 2))

    def block_c(x, c7):  # 17x17 with factorised 7x7 (Mixed_6b..e; paper Fig. 6)
        b1 = c(x, 192, 1, role="C.1x1")
        b7 = c(x, c7, 1, role="C.7x7_reduce")
        b7 = c(b7, c7, (1, 7), 1, (0, 3), role="C.1x7")
        b7 = c(b7, 192, (7, 1), 1, (3, 0), role="C.7x1")
        bd = c(x, c7, 1, role="C.7x7dbl_reduce")
        bd = c(bd, c7, (7, 1), 1, (3, 0), role="C.dbl_7x1")
        bd = c(bd, c7, (1, 7), 1, (0, 3), role="C.dbl_1x7")
        bd = c(bd, c7, (7, 1), 1, (3, 0), role="C.dbl_7x1")
        bd = c(bd, 192, (1, 7), 1, (0, 3), role="C.dbl_1x7")
        bp = c(net.pool(x, 3, 1, 1), 192, 1, role="C.pool_proj")
        return net.concat(b1, b7, bd, bp)

    def block_d(x):  # 17 -> 8 grid reduction (Mixed_7a)
        b3 = c(c(x, 192, 1, role="D.3x3_reduce"), 320, 3, 2, 0, role="D.3x3_s2")
        b7 = c(x, 192, 1, role="D.7x7x3_reduce")
        b7 = c(b7, 192, (1, 7), 1, (0, 3), role="D.1x7")
        b7 = c(b7, 192, (7, 1), 1, (3, 0), role="D.7x1")
        b7 = c(b7, 192, 3, 2, 0, role="D.3x3_s2")
        return net.concat(b3, b7, net.pool(x, 3, 2))

    def block_e(x):  # 8x8 with expanded filter banks (Mixed_7b/c; paper Fig. 7)
        b1 = c(x, 320, 1, role="E.1x1")
        b3 = c(x, 384, 1, role="E.3x3_reduce")
        b3 = net.concat(c(b3, 384, (1, 3), 1, (0, 1), role="E.1x3"),
                        c(b3, 384, (3, 1), 1, (1, 0), role="E.3x1"))
        bd = c(x, 448, 1, role="E.3x3dbl_reduce")
        bd = c(bd, 384, 3, 1, 1, role="E.3x3dbl_1")
        bd = net.concat(c(bd, 384, (1, 3), 1, (0, 1), role="E.dbl_1x3"),
                        c(bd, 384, (3, 1), 1, (1, 0), role="E.dbl_3x1"))
        bp = c(net.pool(x, 3, 1, 1), 192, 1, role="E.pool_proj")
        return net.concat(b1, b3, bd, bp)

    for pf in (32, 64, 64):
        x = block_a(x, pf)             # 256, 288, 288 channels
    x = block_b(x)                     # 768 @ 17
    for c7 in (128, 160, 160, 192):
        x = block_c(x, c7)             # 768 @ 17
    x = block_d(x)                     # 1280 @ 8
    x = block_e(x)                     # 2048 @ 8
    x = block_e(x)                     # 2048 @ 8
    net.fc(net.global_pool(x), 1000)
    return net


# ----------------------------------------------------------------------------
# Transformers
# ----------------------------------------------------------------------------

def bert_base(seq: int):
    """BERT-base (Devlin et al. 2019): L=12, d=768, 12 heads (d_head 64), FFN
    3072. Per layer: separate Q, K, V dense 768->768, attention output dense
    768->768, intermediate 768->3072, output 3072->768; attention products per
    head. Plus the pooler (dense 768->768 on the [CLS] token, M = 1). Embedding
    lookups are not matmuls; no task head (MLM / classifier) is counted."""
    net = Net(f"BERT-base/seq{seq}")
    L, d, h, ff = 12, 768, 12, 3072
    dh = d // h
    for _ in range(L):
        net.matmul(seq, d, d, "attn.q_proj")
        net.matmul(seq, d, d, "attn.k_proj")
        net.matmul(seq, d, d, "attn.v_proj")
        net.matmul(seq, seq, dh, "attn.QK^T(per head)", times=h)
        net.matmul(seq, dh, seq, "attn.AV(per head)", times=h)
        net.matmul(seq, d, d, "attn.out_proj")
        net.matmul(seq, ff, d, "ffn.up")
        net.matmul(seq, d, ff, "ffn.down")
    net.matmul(1, d, d, "pooler")
    return net


def gpt2_small(seq: int):
    """GPT-2 small (Radford et al. 2019; 124M): L=12, d=768, 12 heads, FFN 3072,
    vocab 50257, context 1024. Per layer: fused QKV projection 768->2304 (c_attn),
    attention products per head (causal: the full seq x seq score matrix is
    computed and then masked, as in the reference implementation), output
    projection 768->768, MLP 768->3072->768. Plus the LM head (tied with the
    token embedding) 768->50257 over all `seq` positions (a full-prompt forward
    pass; incremental decoding with a KV cache would use other shapes)."""
    net = Net(f"GPT-2-small/seq{seq}")
    L, d, h, ff, vocab = 12, 768, 12, 3072, 50257
    dh = d // h
    for _ in range(L):
        net.matmul(seq, 3 * d, d, "attn.qkv_proj")
        net.matmul(seq, seq, dh, "attn.QK^T(per head)", times=h)
        net.matmul(seq, dh, seq, "attn.AV(per head)", times=h)
        net.matmul(seq, d, d, "attn.out_proj")
        net.matmul(seq, ff, d, "mlp.up")
        net.matmul(seq, d, ff, "mlp.down")
    net.matmul(seq, vocab, d, "lm_head")
    return net


# ----------------------------------------------------------------------------
# Provenance
# ----------------------------------------------------------------------------

_CNN_COUNTING = ("every nn.Conv2d-equivalent executed in one eval-mode forward pass at batch 1 "
                 "(BN/ReLU/pooling/add/concat not counted); the classifier FC layer(s) as matmul "
                 "M=1 (batch), N=out_features, K=in_features")

MODELS = [
    ("ResNet-18", lambda: resnet_basic("ResNet-18", (2, 2, 2, 2)), {
        "reference": "K. He, X. Zhang, S. Ren, J. Sun, 'Deep Residual Learning for Image Recognition', "
                     "CVPR 2016 (arXiv:1512.03385), Table 1, 18-layer column",
        "variant": "basic blocks [2,2,2,2]; projection shortcuts (option B: 1x1, stride 2) where the "
                   "shape changes; identical in the original release and torchvision resnet18",
        "input": "1x3x224x224",
        "counting": _CNN_COUNTING,
    }),
    ("ResNet-50", lambda: resnet_bottleneck("ResNet-50", (3, 4, 6, 3), stride_on_3x3=False), {
        "reference": "K. He et al., CVPR 2016 (arXiv:1512.03385), Table 1, 50-layer column",
        "variant": "original v1 (paper text: 'downsampling is performed by conv3_1, conv4_1, conv5_1 "
                   "with a stride of 2'; the authors' Caffe release and MXNet/Gluon resnet50_v1 put "
                   "that stride on the first 1x1 of the block); projection shortcuts on the first "
                   "block of each stage. This is the variant of the seed-000 ResNet-50 suite",
        "input": "1x3x224x224",
        "counting": _CNN_COUNTING,
    }),
    ("ResNet-50-v1.5", lambda: resnet_bottleneck("ResNet-50-v1.5", (3, 4, 6, 3), stride_on_3x3=True), {
        "reference": "as ResNet-50; 'v1.5' variant of torchvision resnet50 / NVIDIA DeepLearningExamples "
                     "/ MXNet resnet50_v1b (stride 2 moved from the first 1x1 onto the 3x3 conv)",
        "variant": "same layer counts as ResNet-50, different stride placement; listed separately so "
                   "that a consumer can keep or drop it (both variants are in the zoos PGS crawled)",
        "input": "1x3x224x224",
        "counting": _CNN_COUNTING,
    }),
    ("MobileNet-V2", mobilenet_v2, {
        "reference": "M. Sandler, A. Howard, M. Zhu, A. Zhmoginov, L.-C. Chen, 'MobileNetV2: Inverted "
                     "Residuals and Linear Bottlenecks', CVPR 2018 (arXiv:1801.04381), Table 2",
        "variant": "width multiplier 1.0; 3x3 depthwise convs recorded with groups = C = F (tensorgym "
                   "Conv2d has no groups yet: such rows are tensorgym_compatible=false, a consumer may "
                   "skip them); final classifier recorded as matmul M=1",
        "input": "1x3x224x224",
        "counting": _CNN_COUNTING,
    }),
    ("VGG-16", vgg16, {
        "reference": "K. Simonyan, A. Zisserman, 'Very Deep Convolutional Networks for Large-Scale Image "
                     "Recognition', ICLR 2015 (arXiv:1409.1556), Table 1, configuration D",
        "variant": "13 conv3x3 (pad 1) + FC 25088-4096-4096-1000 (three matmuls M=1)",
        "input": "1x3x224x224",
        "counting": _CNN_COUNTING,
    }),
    ("Inception-v3", inception_v3, {
        "reference": "C. Szegedy, V. Vanhoucke, S. Ioffe, J. Shlens, Z. Wojna, 'Rethinking the Inception "
                     "Architecture for Computer Vision', CVPR 2016 (arXiv:1512.00567), Table 1 and "
                     "Figs. 5-7; layer-level detail as in the released model (TF-slim inception_v3, "
                     "same as torchvision/Keras)",
        "variant": "Mixed_5b-d (A), 6a (B), 6b-e (C, c7 = 128,160,160,192), 7a (D), 7b-c (E); "
                   "auxiliary classifier excluded (training only); 1x7/7x1/1x3/3x1 convs have "
                   "asymmetric padding [pad_h, pad_w] and are tensorgym_compatible=false",
        "input": "1x3x299x299",
        "counting": _CNN_COUNTING,
    }),
    ("DenseNet-121", densenet121, {
        "reference": "G. Huang, Z. Liu, L. van der Maaten, K. Q. Weinberger, 'Densely Connected "
                     "Convolutional Networks', CVPR 2017 (arXiv:1608.06993), Table 1, DenseNet-121",
        "variant": "DenseNet-BC: growth rate 32, bottleneck 1x1 to 128 channels, compression 0.5, "
                   "blocks (6,12,24,16), 64 initial features",
        "input": "1x3x224x224",
        "counting": _CNN_COUNTING,
    }),
]

_BERT_REF = ("J. Devlin, M.-W. Chang, K. Lee, K. Toutanova, 'BERT: Pre-training of Deep Bidirectional "
             "Transformers for Language Understanding', NAACL 2019 (arXiv:1810.04805), BERT-BASE: "
             "L=12, H=768, A=12, FFN 4H=3072")
_GPT2_REF = ("A. Radford, J. Wu, R. Child, D. Luan, D. Amodei, I. Sutskever, 'Language Models are "
             "Unsupervised Multitask Learners', OpenAI 2019, smallest model (117M/124M): 12 layers, "
             "d_model 768, 12 heads, context 1024, vocab 50257; layer structure as in the released "
             "code (fused c_attn, c_proj, c_fc, c_proj, tied LM head)")
_TF_COUNTING = ("dense layers as matmul M=batch*seq (batch 1), N=out_features, K=in_features; "
                "attention QK^T and AV per (batch, head): each layer adds `heads` matmuls "
                "M=seq,N=seq,K=64 (QK^T) and `heads` matmuls M=seq,N=64,K=seq (AV); softmax, "
                "LayerNorm, GELU, embedding lookups not counted")

for _seq in (128, 512):
    MODELS.append((f"BERT-base/seq{_seq}", (lambda s: (lambda: bert_base(s)))(_seq), {
        "reference": _BERT_REF,
        "variant": "BertModel (encoder + pooler); separate Q/K/V dense layers; no MLM/classifier head",
        "input": f"1x{_seq} tokens",
        "counting": _TF_COUNTING + "; pooler dense on [CLS] as M=1",
    }))
for _seq in (128, 512, 1024):
    MODELS.append((f"GPT-2-small/seq{_seq}", (lambda s: (lambda: gpt2_small(s)))(_seq), {
        "reference": _GPT2_REF,
        "variant": "GPT2LMHeadModel, full-prompt forward (no KV cache); causal attention computed "
                   "as a full seq x seq product then masked; LM head over all positions",
        "input": f"1x{_seq} tokens",
        "counting": _TF_COUNTING,
    }))


# ----------------------------------------------------------------------------
# Aggregation and output
# ----------------------------------------------------------------------------

def _row(key) -> dict:
    if key[0] == "conv2d":
        _, N, C, H, W, F, R, S, st, (ph, pw), g = key
        OH, OW = (H + 2 * ph - R) // st + 1, (W + 2 * pw - S) // st + 1
        pad = ph if ph == pw else [ph, pw]
        row = {"op": "conv2d", "N": N, "C": C, "H": H, "W": W, "F": F, "R": R, "S": S,
               "stride": st, "padding": pad, "groups": g, "OH": OH, "OW": OW,
               "flops": 2 * N * F * OH * OW * (C // g) * R * S}
        row["tensorgym_compatible"] = g == 1 and ph == pw
        if row["tensorgym_compatible"]:
            row["tensorgym_key"] = (f"conv2d(N={N},C={C},H={H},W={W},F={F},R={R},S={S},"
                                    f"stride={st},padding={ph},dtype=float32)")
        return row
    _, M, N, K = key
    return {"op": "matmul", "M": M, "N": N, "K": K, "flops": 2 * M * N * K,
            "tensorgym_compatible": True,
            "tensorgym_key": f"matmul(M={M},N={N},K={K},dtype=float32)"}


def _sort_key(item):
    key, data = item
    # count desc, then op (conv2d first), then the shape tuple (deterministic)
    shape = tuple(x if isinstance(x, int) else str(x) for x in key[1:])
    return (-data["count"], key[0], shape)


def build() -> dict:
    table: dict[tuple, dict] = {}
    provenance: dict[str, dict] = {}
    for name, builder, prov in MODELS:
        net = builder()
        assert net.name == name
        per_op = Counter()
        distinct = defaultdict(set)
        for key, role in net.convs + net.matmuls:
            entry = table.setdefault(key, {"count": 0, "models": Counter(), "roles": Counter()})
            entry["count"] += 1
            entry["models"][name] += 1
            entry["roles"][f"{name}:{role}"] += 1
            per_op[key[0]] += 1
            distinct[key[0]].add(key)
        for key in [k for k, _ in net.convs] + net.matmul_calls:
            table[key]["count_batched"] = table[key].get("count_batched", 0) + 1
        provenance[name] = dict(prov)
        provenance[name]["totals"] = {
            "conv2d_instances": per_op["conv2d"],
            "conv2d_distinct": len(distinct["conv2d"]),
            "conv2d_depthwise_instances": sum(1 for k, _ in net.convs if k[-1] > 1),
            "matmul_instances": per_op["matmul"],
            "matmul_distinct": len(distinct["matmul"]),
            "gflop": round(sum(_row(k)["flops"] for k, _ in net.convs + net.matmuls) / 1e9, 3),
        }
    shapes = []
    for key, data in sorted(table.items(), key=_sort_key):
        row = _row(key)
        row["count"] = data["count"]
        row["count_batched"] = data["count_batched"]
        row["models"] = dict(sorted(data["models"].items(), key=lambda kv: (-kv[1], kv[0])))
        row["roles"] = dict(sorted(data["roles"].items(), key=lambda kv: (-kv[1], kv[0])))
        shapes.append(row)
    n_conv = sum(1 for s in shapes if s["op"] == "conv2d")
    return {
        "version": 1,
        "provenance": {
            "purpose": "prior-guided task sampling (seed 004, One-Shot Tuner, Algorithm 1): "
                       "frequency table of conv2d/matmul instances of real architectures",
            "generated_by": "tools/derive_shapes.py (stdlib only; architectures written from the papers, "
                            "cross-checked by tools/crosscheck_torch.py, see tools/SHAPE_PRIORS.md)",
            "conventions": {
                "conv2d": "NCHW, batch N=1; H,W = input size; F = output channels; R,S = kernel "
                          "h,w; padding int (both axes) or [pad_h, pad_w]; dilation 1; groups>1 "
                          "only for depthwise (groups = C = F); OH/OW/flops derived; flops = "
                          "2*N*F*OH*OW*(C/groups)*R*S",
                "matmul": "C[M,N] = A[M,K] @ B[K,N]; dense: M = tokens (or batch 1 for CNN "
                          "classifiers), N = out_features, K = in_features; attention per head "
                          "(QK^T: M=seq,N=seq,K=d_head; AV: M=seq,N=d_head,K=seq)",
                "count": "total occurrences over all listed models; 'models' splits it per model, "
                         "'roles' per model:role; a model run at several sequence lengths is "
                         "listed once per length (e.g. BERT-base/seq128 and BERT-base/seq512)",
                "count_batched": "the same count with each batched matmul (attention: all heads of "
                                 "one layer) counted once instead of once per head; equals count "
                                 "for every conv2d and dense row",
                "tensorgym_compatible": "false for depthwise (groups>1) and asymmetric padding, "
                                        "which tensorgym.workloads.Conv2d cannot express yet",
                "tensorgym_key": "Workload.key of the equivalent tensorgym workload (fp32)",
            },
            "distinct_shapes": {"conv2d": n_conv, "matmul": len(shapes) - n_conv},
            "models": provenance,
        },
        "shapes": shapes,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_out = Path(__file__).resolve().parent.parent / "tensorgym" / "data" / "shape_priors.json"
    ap.add_argument("--out", default=str(default_out))
    ap.add_argument("--list", action="store_true", help="print the table to stdout")
    args = ap.parse_args(argv)
    data = build()
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n")
    d = data["provenance"]["distinct_shapes"]
    print(f"wrote {args.out}: {d['conv2d']} distinct conv2d, {d['matmul']} distinct matmul shapes")
    for name, p in data["provenance"]["models"].items():
        print(f"  {name:22s} {p['totals']}")
    if args.list:
        for s in data["shapes"]:
            shape = ({k: s[k] for k in ("C", "H", "F", "R", "S", "stride", "padding", "groups")}
                     if s["op"] == "conv2d" else {k: s[k] for k in ("M", "N", "K")})
            print(s["count"], s["op"], shape, s["models"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
