"""Models a user might bring, written the usual way (plain `make()` factories, no annotations)."""

import torch
from torch import nn


class Structures(nn.Module):
    """Every output structure at once: dict, tuple, list, nested; None, int, float, bool; integer
    and bool tensors; topk values and indices; a dtype cast (`_assert_tensor_metadata` returns
    None); buffers mutated in place; a depthwise conv; torch.cond."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.norm = nn.LayerNorm(32)
        self.fc = nn.Linear(32, 64)
        self.register_buffer("count", torch.zeros(1))
        self.register_buffer("running", torch.zeros(16))

    def forward(self, image, vec):
        pooled = self.conv(image).mean(dim=(2, 3))
        h = self.fc(self.norm(vec)).relu_().reshape(1, 4, 16)
        values, indices = torch.topk(h, 4, dim=-1)
        best = h.argmax(-1)
        self.count.add_(1)
        self.running.mul_(0.5).add_(h.mean((0, 1)))
        branch = torch.cond(pooled.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (pooled,))
        return {
            "pair": (values, indices),
            "list": [best, best.float(), h > 0],
            "nested": {"cond": branch, "none": None, "int": 3, "float": 0.5, "bool": True},
        }


def make_structures():
    return Structures()


STRUCTURES_INPUTS = "model.inputs=[{shape:[1,8,16,16]},{shape:[1,32]}]"


class ItemOutputs(nn.Module):
    """Python numbers computed at run time (`.item()`): logged as ETDump Double and Int values."""

    def forward(self, x):
        scale = x.abs().max().item()
        positives = (x > 0).sum().item()
        return x * scale, x + positives, scale, positives


def make_item_outputs():
    return ItemOutputs()


class NearTie(nn.Module):
    """Two logits 10.0 and 10.001: distinct in fp32, one value in fp16 (ulp 0.0078 at 10), so a
    delegate's fp16 linear turns argmax's and topk's choice into a tie."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)
        with torch.no_grad():
            self.fc.weight[:2] = 0.0
            self.fc.bias[:2] = torch.tensor([10.0, 10.001])

    def forward(self, x):
        logits = self.fc(x)
        return logits.argmax(-1), logits.topk(2).indices


def make_near_tie():
    return NearTie()


class NearThresholdCond(nn.Module):
    """A torch.cond whose predicate sits 1e-6 (relative) above its threshold: exact in fp32, but
    fp16 rounds `energy * 0.999999` to `energy`, the margin to 0, and the other branch runs."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 16)
        self.out = nn.Linear(16, 16)

    def forward(self, x):
        h = self.inp(x)
        energy = h * h
        margin = energy.sum() - (energy * 0.999999).sum()
        h = torch.cond(margin > 0, lambda t: t.relu(), lambda t: t.sigmoid() - 1.0, (h,))
        return self.out(h)


def make_near_threshold_cond():
    return NearThresholdCond()


class ImplWrapped(nn.Module):
    """torchvision's shape: `forward` only calls `self._forward_impl(x)`, which holds the ops
    (torch.export keeps only `forward` frames unless told otherwise)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8 * 6 * 6, 4)

    def _forward_impl(self, x):
        x = self.conv(x)
        x = torch.flatten(x, 1)
        return self.fc(x)

    def forward(self, x):
        return self._forward_impl(x)


def make_impl_wrapped():
    return ImplWrapped()


IMPL_WRAPPED = ("model._target_=tests.helpers.user_models.make_impl_wrapped",)
IMPL_WRAPPED_INPUTS = "model.inputs=[{shape:[1,3,8,8]}]"
