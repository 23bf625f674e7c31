// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// Only what the tools exchange with models is accepted: little-endian
// float32 ('<f4'), float16 ('<f2'), int32 ('<i4'), int64 ('<i8', token
// ids) and bool ('|b1', masks; one byte, 0 or 1), C order. Anything else is refused with a message that says what was
// found and what to do. The parser never reads outside the given bytes,
// whatever they contain.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace neuroncc::npy {

enum class ElementType { kFloat32, kFloat16, kInt32, kInt64, kBool, kUint8, kInt8, kInt16 };

const char* ElementTypeName(ElementType t);  // "float32", "float16", "int32", "int64", "bool"
const char* ElementTypeDescr(ElementType t);  // "<f4", "<f2", "<i4", "<i8", "|b1"
size_t ElementSize(ElementType t);
bool IsInteger(ElementType t);

struct Array {
  ElementType type = ElementType::kFloat32;
  std::vector<int64_t> shape;  // empty for a 0-d array
  std::string data;            // little-endian elements, C order

  int64_t num_elements() const;
};

// Upper bound on a shape's element count; keeps every byte count far from overflow.
inline constexpr int64_t kMaxElements = int64_t(1) << 40;

// `what` names the source in error messages (usually the file path).
absl::StatusOr<Array> Parse(std::string_view bytes, std::string_view what);
absl::StatusOr<Array> ReadFile(const std::string& path);

// Writes format 1.0 (2.0 if the header needs more than 65535 bytes), with
// the header padded so the data starts on a 64-byte boundary, as numpy does.
std::string Serialize(const Array& array);
absl::Status WriteFileAtomic(const std::string& path, const Array& array);

std::string ShapeString(const std::vector<int64_t>& shape);  // "(4, 512)", "(3,)", "()"

}  // namespace neuroncc::npy
