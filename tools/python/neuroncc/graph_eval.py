"""Evaluate an ATen graph (aten_graph.proto) with PyTorch eager ops.

A reference reader of the interchange format, independent of the exporter's
tracing: it decodes every argument from the protobuf alone, looks the target
up in torch.ops and runs it. The exporter tests use it to show that a written
graph computes what the traced model computes; it also tells an importer
author exactly how each argument kind is meant to be read.
"""
import operator

import torch

from . import aten_graph_pb2 as pb
from .export import TORCH_DTYPES, constant_value


def resolve_target(target):
    """'aten::mul.Tensor' -> torch.ops.aten.mul.Tensor; 'aten::neg' -> torch.ops.aten.neg.default."""
    if target == "getitem":
        return operator.getitem
    ns, _, rest = target.partition("::")
    name, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, ns), name)
    return getattr(packet, overload or "default")


def _schema_types(op):
    if not isinstance(op, torch._ops.OpOverload):
        return [], {}
    args = op._schema.arguments
    # The argument name stands in for the type: Python shows Layout and
    # MemoryFormat as int.
    return [a.name for a in args if not a.kwarg_only], {a.name: a.name for a in args}


def decode(arg, values, schema_name=None):
    kind = arg.WhichOneof("value")
    if kind == "tensor":
        return values[arg.tensor]
    if kind in ("int_value", "float_value", "bool_value", "device"):
        v = getattr(arg, kind)
        return torch.device(v) if kind == "device" else v
    if kind == "int_list":
        return list(arg.int_list.values)
    if kind == "float_list":
        return list(arg.float_list.values)
    if kind == "tensor_list":
        return [values[v] if v else None for v in arg.tensor_list.values]
    if kind == "none":
        return None
    if kind == "dtype":
        return TORCH_DTYPES[arg.dtype]
    if kind == "string_value":
        if schema_name in ("layout", "memory_format"):
            return getattr(torch, arg.string_value)
        return arg.string_value
    raise ValueError("argument %r has no value" % arg)


def evaluate(graph, inputs):
    """Runs `graph` on `inputs` (name -> tensor); returns the outputs as a list."""
    values = {}
    for p in graph.inputs:
        if p.name not in inputs:
            raise KeyError("missing input %s" % p.name)
        values[p.name] = inputs[p.name]
    for c in graph.constants:
        values[c.name] = constant_value(c)
    with torch.no_grad():
        for node in graph.nodes:
            op = resolve_target(node.target)
            pos_names, kw_names = _schema_types(op)
            args, kwargs = [], {}
            for i, a in enumerate(node.args):
                if a.name:
                    kwargs[a.name] = decode(a, values, kw_names.get(a.name))
                else:
                    args.append(decode(a, values, pos_names[i] if i < len(pos_names) else None))
            out = op(*args, **kwargs)
            results = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(results) != len(node.outputs):
                raise ValueError("%s: %d results, %d metas" % (node.name, len(results), len(node.outputs)))
            for r, meta in zip(results, node.outputs):
                if list(r.shape) != list(meta.shape) or pb.DType.Name(meta.dtype) != pb.DType.Name(
                        _dtype_of(r)):
                    raise ValueError("%s: result %s %s does not match its metadata %s %s" % (
                        node.name, list(r.shape), r.dtype, list(meta.shape), pb.DType.Name(meta.dtype)))
            values[node.name] = out
    return [values[name] for name in graph.outputs]


def _dtype_of(t):
    from .export import proto_dtype
    return proto_dtype(t.dtype)
