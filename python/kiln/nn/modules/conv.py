"""kiln.nn.Conv1d, Conv2d and Conv3d: PyTorch's constructor, parameters, initialisation,
padding modes (zeros, reflect, replicate, circular) and padding='same' / 'valid'."""

import math

from .. import functional as F
from .. import init
from .module import Module
from ._helpers import new_parameter, ntuple

__all__ = ["Conv1d", "Conv2d", "Conv3d"]

_PADDING_STRINGS = {"same", "valid"}
_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


class _ConvNd(Module):
    _dims = 0
    _functional_name = ""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        n = self._dims
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        kernel_size = ntuple(kernel_size, n, "kernel_size")
        stride = ntuple(stride, n, "stride")
        dilation = ntuple(dilation, n, "dilation")
        if isinstance(padding, str):
            if padding not in _PADDING_STRINGS:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {_PADDING_STRINGS}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = ntuple(padding, n, "padding")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = False
        self.output_padding = (0,) * n
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad's (left, right) pairs from the last dim backwards.
        if isinstance(padding, str):
            self._reversed_padding_repeated_twice = [0, 0] * n
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(n - 1, -1, -1)):
                    total = d * (k - 1)
                    self._reversed_padding_repeated_twice[2 * i] = total // 2
                    self._reversed_padding_repeated_twice[2 * i + 1] = total - total // 2
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(padding) for _ in range(2)]
        self.weight = new_parameter(out_channels, in_channels // groups, *kernel_size, dtype=dtype, device=device)
        if bias:
            self.bias = new_parameter(out_channels, dtype=dtype, device=device)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _conv(self):
        fn = getattr(F, self._functional_name, None)
        if fn is None:
            raise NotImplementedError(f"{type(self).__name__}: kiln.nn.functional.{self._functional_name} is not "
                                      "available in this build")
        return fn

    def _conv_forward(self, input, weight, bias):
        conv = self._conv()
        zero = (0,) * self._dims
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(padded, weight, bias, self.stride, zero, self.dilation, self.groups)
        if isinstance(self.padding, str):
            pads = self._reversed_padding_repeated_twice
            lefts, rights = pads[0::2], pads[1::2]
            if lefts != rights:
                # 'same' with an even kernel extent pads one more on the right.
                input = F.pad(input, pads)
                return conv(input, weight, bias, self.stride, zero, self.dilation, self.groups)
            return conv(input, weight, bias, self.stride, tuple(reversed(lefts)), self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """Input [N, C_in, L]; weight [C_out, C_in / groups, k]."""

    _dims = 1
    _functional_name = "conv1d"


class Conv2d(_ConvNd):
    """Input [N, C_in, H, W]; weight [C_out, C_in / groups, kH, kW]."""

    _dims = 2
    _functional_name = "conv2d"


class Conv3d(_ConvNd):
    """Input [N, C_in, D, H, W]; weight [C_out, C_in / groups, kD, kH, kW]. Needs
    kiln.nn.functional.conv3d."""

    _dims = 3
    _functional_name = "conv3d"
