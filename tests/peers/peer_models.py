"""baton's built-in models in plain PyTorch, for the peers of `baton bench`.

Each builds the same layers as model/core/builtin_models.cpp and
model/core/model_parts.cpp (widths, batch norm, biases), so that a peer does
the same arithmetic as the baton side it is measured beside. Initial weights
are PyTorch's defaults: they do not change the time of a step.
"""

import torch
from torch import nn

CONVNET_FEATURES = 256  # model_parts.hpp: convnet_features
RESNET18_FEATURES = 512  # model_parts.hpp: resnet18_features
MLP_HIDDEN = 4096


def convnet_trunk(in_channels):
    """The convnet up to its flatten: 3x3 convolutions (padding 1, bias), 2x2 pools."""
    return [
        nn.Conv2d(in_channels, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
    ]


def convnet_backbone(in_channels=1, height=28, width=28):
    """`convnet`: the trunk, fc1 (128 x H/8 x W/8 -> 256) and relu6."""
    flat = 128 * (height // 8) * (width // 8)
    return nn.Sequential(*convnet_trunk(in_channels), nn.Linear(flat, CONVNET_FEATURES), nn.ReLU())


class BasicBlock(nn.Module):
    """torchvision's BasicBlock, as builtin_models.cpp builds it."""

    def __init__(self, inp, out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.conv2 = nn.Conv2d(out, out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.downsample = None
        if stride != 1 or inp != out:
            self.downsample = nn.Sequential(nn.Conv2d(inp, out, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out))

    def forward(self, x):
        identity = self.downsample(x) if self.downsample is not None else x
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + identity)


def resnet18_backbone(in_channels=3):
    """torchvision's resnet18 up to its average pool and flatten (512 features)."""
    return nn.Sequential(
        nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
        nn.ReLU(), nn.MaxPool2d(3, stride=2, padding=1),
        BasicBlock(64, 64), BasicBlock(64, 64),
        BasicBlock(64, 128, 2), BasicBlock(128, 128),
        BasicBlock(128, 256, 2), BasicBlock(256, 256),
        BasicBlock(256, RESNET18_FEATURES, 2), BasicBlock(RESNET18_FEATURES, RESNET18_FEATURES),
        nn.AdaptiveAvgPool2d(1), nn.Flatten())


def mlp(inputs=784, classes=10):
    """`mlp`: inputs -> 4096 -> 4096 -> classes, no biases, batch norm without
    running statistics."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(inputs, MLP_HIDDEN, bias=False),
        nn.BatchNorm1d(MLP_HIDDEN, track_running_stats=False), nn.ReLU(),
        nn.Linear(MLP_HIDDEN, MLP_HIDDEN, bias=False),
        nn.BatchNorm1d(MLP_HIDDEN, track_running_stats=False), nn.ReLU(),
        nn.Linear(MLP_HIDDEN, classes, bias=False))


def head(features, classes):
    """A transfer head (`head`): fc1 (features -> 128), relu, fc2 (128 -> classes)."""
    return nn.Sequential(nn.Linear(features, 128), nn.ReLU(), nn.Linear(128, classes))


def whole_model(name, classes=10):
    """What baton trains under `name` (pipeline and data-parallel): the
    backbone with its classifier fc2 (model::make_pretrain_model), or the mlp
    whole."""
    if name == "convnet":
        return nn.Sequential(*convnet_backbone(), nn.Linear(CONVNET_FEATURES, classes))
    if name == "resnet18":
        return nn.Sequential(*resnet18_backbone(), nn.Linear(RESNET18_FEATURES, classes))
    if name == "mlp":
        return mlp()
    raise SystemExit("unknown model '%s' (convnet, mlp, resnet18)" % name)


def input_shape(name):
    """The shape of one sample the model takes: Fashion-MNIST, or resnet18's synthetic 3x32x32."""
    return (3, 32, 32) if name == "resnet18" else (1, 28, 28)
