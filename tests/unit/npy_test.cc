// .npy reading and writing. Also built with ASan + UBSan (runtime_asan_tests).
#include "npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace neuroncc::npy {
namespace {

// The exact bytes numpy 1.x writes for np.save(f, np.arange(6, dtype='<f4').reshape(2, 3)).
std::string NumpyWritten() {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  dict.append(128 - 10 - dict.size() - 1, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += char(dict.size() & 0xff);
  out += char(dict.size() >> 8);
  out += dict;
  for (int i = 0; i < 6; ++i) {
    float f = float(i);
    out.append(reinterpret_cast<const char*>(&f), 4);
  }
  return out;
}

std::string WithHeader(int major, const std::string& dict, const std::string& data) {
  std::string out = "\x93NUMPY";
  out += char(major);
  out += '\0';
  size_t n = major == 1 ? 2 : 4;
  for (size_t i = 0; i < n; ++i) out += char((dict.size() >> (8 * i)) & 0xff);
  return out + dict + data;
}

void ExpectError(const std::string& bytes, const std::string& needle) {
  absl::StatusOr<Array> a = Parse(bytes, "in.npy");
  ASSERT_FALSE(a.ok()) << "accepted; expected '" << needle << "'";
  EXPECT_NE(std::string(a.status().message()).find(needle), std::string::npos) << a.status();
  EXPECT_NE(std::string(a.status().message()).find("in.npy"), std::string::npos) << a.status();
}

TEST(Npy, ReadsWhatNumpyWrites) {
  absl::StatusOr<Array> a = Parse(NumpyWritten(), "x.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->type, ElementType::kFloat32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(a->data.size(), 24u);
  float f[6];
  std::memcpy(f, a->data.data(), 24);
  EXPECT_EQ(f[5], 5.0f);
}

TEST(Npy, WritesWhatNumpyWrites) {
  Array a;
  a.shape = {2, 3};
  for (int i = 0; i < 6; ++i) {
    float f = float(i);
    a.data.append(reinterpret_cast<const char*>(&f), 4);
  }
  EXPECT_EQ(Serialize(a), NumpyWritten());
}

TEST(Npy, RoundTripsShapesAndTypes) {
  for (ElementType t : {ElementType::kFloat32, ElementType::kFloat16, ElementType::kInt32, ElementType::kInt64,
                        ElementType::kInt16, ElementType::kInt8, ElementType::kUint8}) {
    for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{}, {5}, {2, 3, 4}, {0, 7}}) {
      Array a;
      a.type = t;
      a.shape = shape;
      a.data.assign(size_t(a.num_elements()) * ElementSize(t), '\x5a');
      std::string bytes = Serialize(a);
      size_t header_end = 10 + (uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8);
      EXPECT_EQ(header_end % 64, 0u);
      absl::StatusOr<Array> b = Parse(bytes, "rt.npy");
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(b->type, t);
      EXPECT_EQ(b->shape, shape);
      EXPECT_EQ(b->data, a.data);
    }
  }
}

TEST(Npy, IntegerArraysAsNumpyWritesThem) {
  // np.save(f, np.array([3, -1, 2**40], dtype=np.int64)) and the int32 form.
  struct Case {
    const char* descr;
    ElementType type;
    size_t size;
  };
  for (const Case& c : {Case{"<i8", ElementType::kInt64, 8}, Case{"<i4", ElementType::kInt32, 4},
                        Case{"<i2", ElementType::kInt16, 2}, Case{"|i1", ElementType::kInt8, 1}}) {
    SCOPED_TRACE(c.descr);
    std::string dict = std::string("{'descr': '") + c.descr + "', 'fortran_order': False, 'shape': (3,), }";
    dict.append(128 - 10 - dict.size() - 1, ' ');
    dict += '\n';
    std::string data;
    const int64_t big = c.size == 8 ? int64_t(1) << 40 : (int64_t(1) << (8 * c.size - 1)) - 1;
    for (int64_t v : {int64_t(3), int64_t(-1), big})
      data.append(reinterpret_cast<const char*>(&v), c.size);  // little-endian host
    std::string file = WithHeader(1, dict, data);
    absl::StatusOr<Array> a = Parse(file, "ids.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, c.type);
    EXPECT_EQ(a->shape, (std::vector<int64_t>{3}));
    EXPECT_EQ(a->data, data);
    EXPECT_EQ(ElementSize(a->type), c.size);
    EXPECT_TRUE(IsInteger(a->type));
    EXPECT_EQ(std::string(ElementTypeDescr(a->type)), c.descr);
    EXPECT_EQ(Serialize(*a), file);  // byte for byte what numpy writes
  }
  EXPECT_EQ(std::string(ElementTypeName(ElementType::kInt32)), "int32");
  EXPECT_EQ(std::string(ElementTypeName(ElementType::kInt64)), "int64");
  EXPECT_EQ(std::string(ElementTypeName(ElementType::kUint8)), "uint8");
  EXPECT_EQ(std::string(ElementTypeDescr(ElementType::kUint8)), "|u1");
  EXPECT_TRUE(IsInteger(ElementType::kUint8));
  EXPECT_FALSE(IsInteger(ElementType::kBool));
  EXPECT_FALSE(IsInteger(ElementType::kFloat32));
  EXPECT_FALSE(IsInteger(ElementType::kFloat16));
}

TEST(Npy, BoolArraysAsNumpyWritesThem) {
  // np.save(f, np.array([[True, False, True], [False, False, True]])).
  std::string dict = "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 3), }";
  dict.append(128 - 10 - dict.size() - 1, ' ');
  dict += '\n';
  const std::string data("\x01\x00\x01\x00\x00\x01", 6);
  std::string file = WithHeader(1, dict, data);
  absl::StatusOr<Array> a = Parse(file, "mask.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->type, ElementType::kBool);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->data, data);
  EXPECT_EQ(ElementSize(a->type), 1u);
  EXPECT_EQ(std::string(ElementTypeName(a->type)), "bool");
  EXPECT_EQ(Serialize(*a), file);
  ExpectError(WithHeader(1, dict, data.substr(0, 5)), "bool needs 6 data bytes but the file has 5");
}

TEST(Npy, ReadsVersions2And3AndDictVariants) {
  std::string data(8, '\0');
  EXPECT_TRUE(Parse(WithHeader(2, "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }\n", data), "v2").ok());
  EXPECT_TRUE(Parse(WithHeader(3, "{\"shape\": (2,2), \"descr\": \"<f2\", \"fortran_order\": False}", data), "v3").ok());
  absl::StatusOr<Array> scalar =
      Parse(WithHeader(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", std::string(4, '\0')), "s");
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->shape.empty());
}

TEST(Npy, RefusesBadFilesWithClearMessages) {
  std::string d4(24, '\0');
  auto dict = [](const std::string& descr, const std::string& fortran, const std::string& shape) {
    return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  };
  ExpectError("", "magic");
  ExpectError("\x93NUMPX\x01\x00\x00\x00", "magic");
  ExpectError(WithHeader(4, dict("<f4", "False", "(2, 3)"), d4), "version 4");
  ExpectError(WithHeader(1, dict("<f4", "True", "(2, 3)"), d4), "fortran_order is True");
  ExpectError(WithHeader(1, dict("<f8", "False", "(3,)"), d4), "float64");
  ExpectError(WithHeader(1, dict(">f4", "False", "(2, 3)"), d4), "big-endian");
  ExpectError(WithHeader(1, dict("|u2", "False", "(2, 3)"), d4), "unsupported dtype");
  ExpectError(WithHeader(1, dict("|u1", "False", "(2, 3)"), d4), "uint8 needs 6 data bytes but the file has 24");
  ExpectError(WithHeader(1, dict(">i8", "False", "(3,)"), d4), "'>i8' is big-endian");
  ExpectError(WithHeader(1, dict(">i4", "False", "(2, 3)"), d4), "big-endian");
  ExpectError(WithHeader(1, dict("<u4", "False", "(2, 3)"), d4),
              "unsupported dtype '<u4' (supported: '<f4' float32, '<f2' float16, '<i4' int32, '<i8' int64, "
              "'<i2' int16, '|i1' int8, '|u1' uint8, '|b1' bool)");
  ExpectError(WithHeader(1, dict(">u1", "False", "(2, 3)"), d4), "unsupported dtype '>u1'");
  ExpectError(WithHeader(1, dict(">i2", "False", "(12,)"), d4), "'>i2' is big-endian");
  ExpectError(WithHeader(1, dict("<i8", "False", "(4,)"), d4), "int64 needs 32 data bytes but the file has 24");
  ExpectError(WithHeader(1, dict("<i4", "False", "(5,)"), d4), "trailing bytes");
  ExpectError(WithHeader(1, dict("<f4", "False", "(2, 4)"), d4), "truncated");
  ExpectError(WithHeader(1, dict("<f4", "False", "(2, 2)"), d4), "trailing bytes");
  ExpectError(WithHeader(1, dict("<f4", "False", "(1099511627776, 1099511627776)"), d4), "too many elements");
  ExpectError(WithHeader(1, dict("<f4", "False", "(99999999999999999999,)"), d4), "too large");
  ExpectError(WithHeader(1, dict("<f4", "False", "(6)"), d4), "not a tuple");
  ExpectError(WithHeader(1, dict("<f4", "False", "(-6,)"), d4), "non-negative");
  ExpectError(WithHeader(1, dict("<f4", "Maybe", "(6,)"), d4), "fortran_order");
  ExpectError(WithHeader(1, "{'descr': '<f4', 'shape': (6,), }", d4), "lacks");
  ExpectError(WithHeader(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", d4),
              "duplicate");
  ExpectError(WithHeader(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", d4),
              "unexpected header key");
  ExpectError(WithHeader(1, "{'descr: '<f4'", d4), "");
  ExpectError(WithHeader(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), } junk", d4),
              "trailing characters");
  ExpectError(WithHeader(1, "{'descr': '<f4\xc3\xa9', 'fortran_order': False, 'shape': (6,)}", d4),
              "non-ASCII");
  // A header length that runs past the end of the file.
  std::string lying = NumpyWritten();
  lying[8] = '\xff';
  lying[9] = '\xff';
  ExpectError(lying, "runs past the end");
}

TEST(Npy, TruncationAtEveryLengthIsRefused) {
  std::string bytes = NumpyWritten();
  for (size_t len = 0; len < bytes.size(); ++len)
    EXPECT_FALSE(Parse(bytes.substr(0, len), "t.npy").ok()) << len;
}

TEST(Npy, ByteMutationsNeverCrash) {
  // Under ASan this proves the parser stays inside the buffer whatever the
  // header says; outside ASan it still checks that nothing throws or aborts.
  std::string bytes = NumpyWritten();
  int accepted = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int v : {0x00, 0x20, 0x27, 0x28, 0x29, 0x2c, 0x30, 0x39, 0x7b, 0x7d, 0xff}) {
      std::string b = bytes;
      b[i] = char(v);
      absl::StatusOr<Array> a = Parse(b, "m.npy");
      if (a.ok()) {
        ++accepted;
        EXPECT_EQ(a->data.size(), size_t(a->num_elements()) * ElementSize(a->type));
      }
    }
  }
  EXPECT_GT(accepted, 0);  // data-byte mutations are legitimate files
}

TEST(Npy, ShapeString) {
  EXPECT_EQ(ShapeString({}), "()");
  EXPECT_EQ(ShapeString({3}), "(3,)");
  EXPECT_EQ(ShapeString({4, 512}), "(4, 512)");
}

}  // namespace
}  // namespace neuroncc::npy
