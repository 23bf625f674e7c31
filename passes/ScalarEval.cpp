//===- ScalarEval.cpp - elementwise ops on one element --------------------===//

#include "passes/ScalarEval.h"

#include <cmath>

#include "dialects/aten/AtenDialect.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace neuroncc {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The scalar function of an elementwise op over its tensor operands'
// elements, in operand order; std::nullopt if `op` is not elementwise.
}  // namespace

std::optional<std::function<double(ArrayRef<double>)>> scalarFunction(Operation* op) {
  using Fn = std::function<double(ArrayRef<double>)>;
  auto cmp = [](auto pred) -> Fn { return [pred](ArrayRef<double> a) { return pred(a[0], a[1]) ? 1.0 : 0.0; }; };
  auto cmpScalar = [](double s, auto pred) -> Fn {
    return [s, pred](ArrayRef<double> a) { return pred(a[0], s) ? 1.0 : 0.0; };
  };
  auto unary = [](double (*f)(double)) -> Fn { return [f](ArrayRef<double> a) { return f(a[0]); }; };
  return llvm::TypeSwitch<Operation*, std::optional<Fn>>(op)
      .Case([&](aten::MulTensorOp) -> Fn { return [](ArrayRef<double> a) { return a[0] * a[1]; }; })
      .Case([&](aten::MaximumOp) -> Fn {
        return [](ArrayRef<double> a) { return std::isnan(a[0]) || std::isnan(a[1]) ? NAN : std::max(a[0], a[1]); };
      })
      .Case([&](aten::MinimumOp) -> Fn {
        return [](ArrayRef<double> a) { return std::isnan(a[0]) || std::isnan(a[1]) ? NAN : std::min(a[0], a[1]); };
      })
      .Case([&](aten::DivTensorOp) -> Fn { return [](ArrayRef<double> a) { return a[0] / a[1]; }; })
      .Case([&](aten::PowTensorTensorOp) -> Fn { return [](ArrayRef<double> a) { return std::pow(a[0], a[1]); }; })
      .Case([&](aten::AddTensorOp o) -> Fn {
        double alpha = o.getAlpha().convertToDouble();
        return [alpha](ArrayRef<double> a) { return a[0] + alpha * a[1]; };
      })
      .Case([&](aten::SubTensorOp o) -> Fn {
        double alpha = o.getAlpha().convertToDouble();
        return [alpha](ArrayRef<double> a) { return a[0] - alpha * a[1]; };
      })
      .Case([&](aten::MulScalarOp o) -> Fn {
        double s = o.getOther().convertToDouble();
        return [s](ArrayRef<double> a) { return a[0] * s; };
      })
      .Case([&](aten::DivScalarOp o) -> Fn {
        double s = o.getOther().convertToDouble();
        return [s](ArrayRef<double> a) { return a[0] / s; };
      })
      .Case([&](aten::AddScalarOp o) -> Fn {
        double s = o.getOther().convertToDouble() * o.getAlpha().convertToDouble();
        return [s](ArrayRef<double> a) { return a[0] + s; };
      })
      .Case([&](aten::SubScalarOp o) -> Fn {
        double s = o.getOther().convertToDouble() * o.getAlpha().convertToDouble();
        return [s](ArrayRef<double> a) { return a[0] - s; };
      })
      .Case([&](aten::RsubScalarOp o) -> Fn {
        double s = o.getOther().convertToDouble(), alpha = o.getAlpha().convertToDouble();
        return [s, alpha](ArrayRef<double> a) { return s - alpha * a[0]; };
      })
      .Case([&](aten::PowTensorScalarOp o) -> Fn {
        double e = o.getOther().convertToDouble();
        return [e](ArrayRef<double> a) { return std::pow(a[0], e); };
      })
      .Case([&](aten::NegOp) -> Fn { return [](ArrayRef<double> a) { return -a[0]; }; })
      .Case([&](aten::ExpOp) { return unary(std::exp); })
      .Case([&](aten::LogOp) { return unary(std::log); })
      .Case([&](aten::SqrtOp) { return unary(std::sqrt); })
      .Case([&](aten::TanhOp) { return unary(std::tanh); })
      .Case([&](aten::SinOp) { return unary(std::sin); })
      .Case([&](aten::CosOp) { return unary(std::cos); })
      .Case([&](aten::AtanOp) { return unary(std::atan); })
      .Case([&](aten::ErfOp) { return unary(std::erf); })
      .Case([&](aten::Expm1Op) { return unary(std::expm1); })
      .Case([&](aten::Log1pOp) { return unary(std::log1p); })
      .Case([&](aten::FloorOp) { return unary(std::floor); })
      .Case([&](aten::CeilOp) { return unary(std::ceil); })
      .Case([&](aten::TruncOp) { return unary(std::trunc); })
      .Case([&](aten::RoundOp) { return unary(std::nearbyint); })
      .Case([&](aten::RsqrtOp) -> Fn { return [](ArrayRef<double> a) { return 1.0 / std::sqrt(a[0]); }; })
      .Case([&](aten::SigmoidOp) -> Fn { return [](ArrayRef<double> a) { return sigmoid(a[0]); }; })
      .Case([&](aten::AbsOp) -> Fn { return [](ArrayRef<double> a) { return std::fabs(a[0]); }; })
      .Case([&](aten::SiluOp) -> Fn { return [](ArrayRef<double> a) { return a[0] * sigmoid(a[0]); }; })
      .Case([&](aten::ReluOp) -> Fn {
        return [](ArrayRef<double> a) { return std::isnan(a[0]) ? a[0] : std::max(a[0], 0.0); };
      })
      .Case([&](aten::GeluOp o) -> Fn {
        if (o.getApproximate() == "tanh")
          return [](ArrayRef<double> a) {
            double x = a[0];
            return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
          };
        return [](ArrayRef<double> a) { return 0.5 * a[0] * (1.0 + std::erf(a[0] / std::sqrt(2.0))); };
      })
      .Case([&](aten::ToCopyOp) -> Fn { return [](ArrayRef<double> a) { return a[0]; }; })
      .Case([&](aten::EqTensorOp) { return cmp(std::equal_to<double>()); })
      .Case([&](aten::NeTensorOp) { return cmp(std::not_equal_to<double>()); })
      .Case([&](aten::LtTensorOp) { return cmp(std::less<double>()); })
      .Case([&](aten::LeTensorOp) { return cmp(std::less_equal<double>()); })
      .Case([&](aten::GtTensorOp) { return cmp(std::greater<double>()); })
      .Case([&](aten::GeTensorOp) { return cmp(std::greater_equal<double>()); })
      .Case([&](aten::EqScalarOp o) { return cmpScalar(o.getOther().convertToDouble(), std::equal_to<double>()); })
      .Case([&](aten::NeScalarOp o) { return cmpScalar(o.getOther().convertToDouble(), std::not_equal_to<double>()); })
      .Case([&](aten::LtScalarOp o) { return cmpScalar(o.getOther().convertToDouble(), std::less<double>()); })
      .Case([&](aten::LeScalarOp o) { return cmpScalar(o.getOther().convertToDouble(), std::less_equal<double>()); })
      .Case([&](aten::GtScalarOp o) { return cmpScalar(o.getOther().convertToDouble(), std::greater<double>()); })
      .Case([&](aten::GeScalarOp o) { return cmpScalar(o.getOther().convertToDouble(), std::greater_equal<double>()); })
      .Case([&](aten::WhereSelfOp) -> Fn { return [](ArrayRef<double> a) { return a[0] != 0.0 ? a[1] : a[2]; }; })
      .Case([&](aten::MaskedFillScalarOp o) -> Fn {
        double fill = o.getValue().convertToDouble();
        return [fill](ArrayRef<double> a) { return a[1] != 0.0 ? fill : a[0]; };
      })
      .Default([](Operation*) { return std::nullopt; });
}

}  // namespace neuroncc
