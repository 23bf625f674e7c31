"""neuron-cc from Python.

The workflow (torch needed):
- trace(module_or_fn, example_inputs, opt=2, target="trn1") -> CompiledModel,
  callable with torch tensors; .save(path), load(path); compile_graph(path)
  for a graph file (.mlir / .pb)
- profile(output_dir=..., schedule=...) around calls: the profile directory,
  key_averages().table(...); torch_trace_handler / merge_torch_profile merge
  torch.profiler's CPU events into its trace.json

Modules:
- export: PyTorch function/module -> ATen graph (.pb / .pbtxt, aten_graph.proto)
- compiled, profiler: the workflow above; nrt: libnrt's C API through ctypes
- aten_graph_pb2: protoc's module for compiler/graph/aten_graph.proto (checked in)
- graph_eval: evaluates an exported graph with eager ops (a reference reader)
- models: small random-weight models (LLaMA layer, GPT-2 block, TransformerEncoderLayer, MLP)
- workloads: production-size bf16 workloads (7B LLaMA layer...), fake-traced, weights as inputs
- toolchain: drives neuron-cc / neuron-run / neuron-profile
"""

_LAZY = {
    "trace": "compiled", "load": "compiled", "compile_graph": "compiled", "CompiledModel": "compiled", "CompileError": "compiled",
    "ToolNotFoundError": "compiled",
    "profile": "profiler", "schedule": "profiler", "merge_torch_profile": "profiler",
    "torch_trace_handler": "profiler",
    "LibnrtNotFoundError": "nrt", "NrtError": "nrt",
    "ExportError": "export",
}


def __getattr__(name):
    # Imported on first use, so that `from neuroncc import toolchain` needs no torch.
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module("." + _LAZY[name], __name__), name)
    raise AttributeError("module 'neuroncc' has no attribute %r" % name)


__all__ = sorted(_LAZY)
