#include "passes/IsaProto.h"

#include "dialects/nc/NcDialect.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace neuroncc {

bool isIsaInstruction(Operation* op) {
  return llvm::isa<nc::DmaLoadOp, nc::DmaStoreOp, nc::DmaGatherOp, nc::TensorTensorOp, nc::TensorScalarOp,
                   nc::ActivationOp, nc::TensorReduceOp, nc::TensorSelectOp, nc::IotaOp,
                   nc::MatmulOp, nc::TransposeOp>(op);
}

neff::Engine engineFromName(StringRef name) {
  return llvm::StringSwitch<neff::Engine>(name)
      .Case("tensor", neff::TENSOR)
      .Case("vector", neff::VECTOR)
      .Case("scalar", neff::SCALAR)
      .Case("gpsimd", neff::GPSIMD)
      .Case("dma", neff::DMA)
      .Default(neff::ENGINE_INVALID);
}

neff::DType dtypeOf(Type elem) {
  if (elem.isF32()) return neff::F32;
  if (elem.isBF16()) return neff::BF16;
  if (elem.isF16()) return neff::F16;
  if (elem.isInteger(32)) return neff::I32;
  if (elem.isInteger(64)) return neff::I64;
  if (elem.isUnsignedInteger(8)) return neff::U8;
  if (elem.isSignedInteger(8)) return neff::I8;
  if (elem.isSignedInteger(16)) return neff::I16;
  if (elem.isSignlessInteger(8)) return neff::BOOL;  // graph I/O bools, one byte each
  return neff::DTYPE_INVALID;
}

namespace {

neff::AluOp aluFromName(StringRef name) {
  return llvm::StringSwitch<neff::AluOp>(name)
      .Case("add", neff::ADD)
      .Case("sub", neff::SUB)
      .Case("mul", neff::MUL)
      .Case("div", neff::DIV)
      .Case("max", neff::MAX)
      .Case("min", neff::MIN)
      .Case("bypass", neff::BYPASS)
      .Case("is_equal", neff::IS_EQUAL)
      .Case("not_equal", neff::NOT_EQUAL)
      .Case("is_lt", neff::IS_LT)
      .Case("is_le", neff::IS_LE)
      .Case("is_gt", neff::IS_GT)
      .Case("is_ge", neff::IS_GE)
      .Case("pow", neff::POW)
      .Default(neff::ALU_INVALID);
}

neff::ActivationFunc funcFromName(StringRef name) {
  return llvm::StringSwitch<neff::ActivationFunc>(name)
      .Case("identity", neff::IDENTITY)
      .Case("exp", neff::EXP)
      .Case("rsqrt", neff::RSQRT)
      .Case("sqrt", neff::SQRT)
      .Case("square", neff::SQUARE)
      .Case("negate", neff::NEGATE)
      .Case("reciprocal", neff::RECIPROCAL)
      .Case("log", neff::LOG)
      .Case("tanh", neff::TANH)
      .Case("sigmoid", neff::SIGMOID)
      .Case("relu", neff::RELU)
      .Case("gelu", neff::GELU)
      .Case("gelu_tanh", neff::GELU_TANH)
      .Case("silu", neff::SILU)
      .Case("abs", neff::ABS)
      .Case("sin", neff::SIN)
      .Case("cos", neff::COS)
      .Case("erf", neff::ERF)
      .Case("expm1", neff::EXPM1)
      .Case("log1p", neff::LOG1P)
      .Case("floor", neff::FLOOR)
      .Case("ceil", neff::CEIL)
      .Case("trunc", neff::TRUNC)
      .Case("round", neff::ROUND)
      .Case("atan", neff::ATAN)
      .Default(neff::ACT_INVALID);
}

void fillTile(neff::TileRef* ref, Value tile, int64_t partStart = 0, int64_t parts = -1) {
  auto type = llvm::cast<MemRefType>(tile.getType());
  int64_t offset = nc::tileByteOffset(tile);
  ref->set_space(nc::isPsumTile(tile.getType()) ? neff::PSUM : neff::SBUF);
  ref->set_start_partition(uint32_t(partStart));
  ref->set_partitions(uint32_t(parts < 0 ? type.getDimSize(0) : parts));
  ref->set_byte_offset(uint32_t(offset));
  ref->set_num_elements(uint32_t(type.getDimSize(1)));
  ref->set_dtype(dtypeOf(type.getElementType()));
  if (int64_t step = nc::tileStep(tile); step > 1) ref->set_step(uint32_t(step));
}

void fillAccessPattern(neff::AccessPattern* ap, uint32_t tensor, int64_t offset,
                       ArrayRef<int64_t> pairs, int64_t partitionDims = 1) {
  ap->set_tensor(tensor);
  ap->set_offset(offset);
  if (partitionDims > 1) ap->set_partition_dims(uint32_t(partitionDims));
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    neff::Dim* d = ap->add_dims();
    d->set_stride(pairs[i]);
    d->set_count(pairs[i + 1]);
  }
}

}  // namespace

neff::Instruction toProtoInstruction(Operation* op, llvm::function_ref<uint32_t(Value)> tensorIdOf) {
  neff::Instruction inst;
  if (auto e = op->getAttrOfType<StringAttr>("engine")) inst.set_engine(engineFromName(e.getValue()));
  if (auto q = op->getAttrOfType<IntegerAttr>("queue")) inst.set_queue(uint32_t(q.getInt()));
  if (auto s = op->getAttrOfType<IntegerAttr>("source_op")) inst.set_source_op(int32_t(s.getInt()));
  else inst.set_source_op(-1);
  if (auto waits = op->getAttrOfType<DenseI64ArrayAttr>("waits")) {
    ArrayRef<int64_t> w = waits.asArrayRef();
    for (size_t i = 0; i + 1 < w.size(); i += 2) {
      neff::Wait* wait = inst.add_waits();
      wait->set_queue(uint32_t(w[i]));
      wait->set_count(uint32_t(w[i + 1]));
    }
  }
  llvm::TypeSwitch<Operation*>(op)
      .Case([&](nc::DmaLoadOp o) {
        inst.set_opcode(neff::DMA_LOAD);
        fillTile(inst.mutable_out(), o.getTile(), o.getPartStart(), nc::dmaPartitions(o));
        fillAccessPattern(inst.mutable_hbm(), tensorIdOf(o.getHbm()), o.getOffset(), o.getAp(), nc::partitionDims(o));
      })
      .Case([&](nc::DmaGatherOp o) {
        inst.set_opcode(neff::DMA_GATHER);
        fillTile(inst.mutable_out(), o.getTile(), o.getPartStart(), o.getAp()[1]);
        fillAccessPattern(inst.mutable_hbm(), tensorIdOf(o.getTable()), o.getOffset(), o.getAp());
        inst.set_index_tensor(tensorIdOf(o.getIndex()));
        inst.set_index_offset(o.getIndexOffsetAttr().getInt());
        inst.set_index_bound(uint64_t(o.getIndexBoundAttr().getInt()));
      })
      .Case([&](nc::DmaStoreOp o) {
        inst.set_opcode(neff::DMA_STORE);
        fillTile(inst.mutable_in0(), o.getTile(), o.getPartStart(), nc::dmaPartitions(o));
        fillAccessPattern(inst.mutable_hbm(), tensorIdOf(o.getHbm()), o.getOffset(), o.getAp(), nc::partitionDims(o));
      })
      .Case([&](nc::TensorTensorOp o) {
        inst.set_opcode(neff::TENSOR_TENSOR);
        fillTile(inst.mutable_out(), o.getOut());
        fillTile(inst.mutable_in0(), o.getIn0());
        fillTile(inst.mutable_in1(), o.getIn1());
        inst.set_alu(aluFromName(o.getAlu()));
      })
      .Case([&](nc::TensorScalarOp o) {
        inst.set_opcode(neff::TENSOR_SCALAR);
        fillTile(inst.mutable_out(), o.getOut());
        fillTile(inst.mutable_in0(), o.getIn0());
        if (o.getScalar()) fillTile(inst.mutable_in1(), o.getScalar());
        inst.set_alu(aluFromName(o.getAlu()));
        inst.set_imm(float(o.getImm().convertToDouble()));
        inst.set_reverse(o.getReverse());
      })
      .Case([&](nc::ActivationOp o) {
        inst.set_opcode(neff::ACTIVATION);
        fillTile(inst.mutable_out(), o.getOut());
        fillTile(inst.mutable_in0(), o.getIn0());
        if (o.getScaleTile()) fillTile(inst.mutable_in1(), o.getScaleTile());
        if (o.getBiasTile()) fillTile(inst.mutable_in2(), o.getBiasTile());
        if (o.getAccum()) fillTile(inst.mutable_accum(), o.getAccum());
        inst.set_func(funcFromName(o.getFunc()));
        inst.set_scale(float(o.getScale().convertToDouble()));
        inst.set_bias(float(o.getBias().convertToDouble()));
      })
      .Case([&](nc::TensorReduceOp o) {
        inst.set_opcode(neff::TENSOR_REDUCE);
        fillTile(inst.mutable_out(), o.getOut());
        fillTile(inst.mutable_in0(), o.getIn0());
        inst.set_alu(aluFromName(o.getAlu()));
      })
      .Case([&](nc::TensorSelectOp o) {
        inst.set_opcode(neff::TENSOR_SELECT);
        fillTile(inst.mutable_out(), o.getOut());
        fillTile(inst.mutable_in0(), o.getOnTrue());
        fillTile(inst.mutable_in1(), o.getOnFalse());
        fillTile(inst.mutable_in2(), o.getPred());
      })
      .Case([&](nc::IotaOp o) {
        inst.set_opcode(neff::IOTA);
        fillTile(inst.mutable_out(), o.getOut());
        inst.set_imm(float(o.getBase().convertToDouble()));
        inst.set_scale(float(o.getPartitionStep().convertToDouble()));
        inst.set_bias(float(o.getElementStep().convertToDouble()));
      })
      .Case([&](nc::MatmulOp o) {
        inst.set_opcode(neff::MATMUL);
        fillTile(inst.mutable_out(), o.getOut());
        fillTile(inst.mutable_in0(), o.getStationary());
        fillTile(inst.mutable_in1(), o.getMoving());
        inst.set_accumulate(o.getAccumulate());
      })
      .Case([&](nc::TransposeOp o) {
        inst.set_opcode(neff::TRANSPOSE);
        fillTile(inst.mutable_out(), o.getOut());
        fillTile(inst.mutable_in0(), o.getIn0());
      });
  return inst;
}

}  // namespace neuroncc
