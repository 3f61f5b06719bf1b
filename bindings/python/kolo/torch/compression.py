"""Gradient compression for kolo.torch, as horovod.torch.compression.

A compressor turns a tensor into the tensor that crosses the wire plus a context, and back.
"""

import torch


class Compressor(object):
    """Interface for compressing and decompressing a tensor."""

    @staticmethod
    def compress(tensor):
        """Returns (tensor to communicate, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        """Returns the tensor rebuilt from the communicated one and the context."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """No compression: the tensor is communicated as it is."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors cross the wire as float16 and come back in their own dtype.
    Other dtypes are left alone."""

    @staticmethod
    def compress(tensor):
        dtype = tensor.dtype
        if dtype.is_floating_point and dtype != torch.float16:
            return tensor.to(torch.float16), dtype
        return tensor, dtype

    @staticmethod
    def decompress(tensor, ctx):
        dtype = ctx
        if dtype is not None and dtype.is_floating_point and tensor.dtype != dtype:
            return tensor.to(dtype)
        return tensor


class Compression(object):
    """The compressors, by Horovod's names."""

    none = NoneCompressor
    """No compression."""

    fp16 = FP16Compressor
    """Floating-point tensors compressed to float16 for the wire."""
