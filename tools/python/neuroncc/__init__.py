"""Python helpers for neuron-cc.

- export: PyTorch function/module -> ATen graph (.pb / .pbtxt, aten_graph.proto)
- aten_graph_pb2: protoc's module for compiler/graph/aten_graph.proto (checked in)
- graph_eval: evaluates an exported graph with eager ops (a reference reader)
- models: small random-weight models (LLaMA layer, GPT-2 block, TransformerEncoderLayer, MLP)
- workloads: production-size bf16 workloads (7B LLaMA layer...), fake-traced, weights as inputs
- toolchain: drives neuron-cc / neuron-run / neuron-profile
"""
