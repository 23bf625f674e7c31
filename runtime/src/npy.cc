#include "npy.h"

#include "file_util.h"

#include <algorithm>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace neuroncc::npy {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

// Cursor over the header dictionary, which numpy writes as a Python literal:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (4, 512), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view what) : s_(text), what_(what) {}

  absl::Status Parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    SkipSpace();
    if (!Eat('{')) return Error("header does not start with '{'");
    while (true) {
      SkipSpace();
      if (Eat('}')) break;
      std::string key;
      if (absl::Status st = String(&key); !st.ok()) return st;
      SkipSpace();
      if (!Eat(':')) return Error(absl::StrCat("expected ':' after key '", key, "'"));
      SkipSpace();
      if (key == "descr") {
        if (have_descr) return Error("duplicate key 'descr'");
        have_descr = true;
        if (absl::Status st = String(descr); !st.ok()) return st;
      } else if (key == "fortran_order") {
        if (have_fortran) return Error("duplicate key 'fortran_order'");
        have_fortran = true;
        if (Word("True")) {
          *fortran = true;
        } else if (Word("False")) {
          *fortran = false;
        } else {
          return Error("fortran_order is neither True nor False");
        }
      } else if (key == "shape") {
        if (have_shape) return Error("duplicate key 'shape'");
        have_shape = true;
        if (absl::Status st = Tuple(shape); !st.ok()) return st;
      } else {
        return Error(absl::StrCat("unexpected header key '", key, "'"));
      }
      SkipSpace();
      if (Eat(',')) continue;
      SkipSpace();
      if (Eat('}')) break;
      return Error("expected ',' or '}' in the header");
    }
    SkipSpace();
    if (pos_ != s_.size()) return Error("trailing characters after the header dictionary");
    if (!have_descr || !have_fortran || !have_shape)
      return Error("header lacks one of 'descr', 'fortran_order', 'shape'");
    return absl::OkStatus();
  }

 private:
  absl::Status Error(std::string_view msg) const {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what_), ": bad .npy header: ", std::string(msg)));
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' ||
                                s_[pos_] == '\r'))
      ++pos_;
  }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  absl::Status String(std::string* out) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
      return Error("expected a quoted string");
    char q = s_[pos_++];
    size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos) return Error("unterminated string");
    *out = std::string(s_.substr(pos_, end - pos_));
    if (out->find('\\') != std::string::npos) return Error("escape sequences are not supported");
    pos_ = end + 1;
    return absl::OkStatus();
  }
  absl::Status Tuple(std::vector<int64_t>* shape) {
    shape->clear();
    if (!Eat('(')) return Error("shape is not a tuple");
    bool need_sep = false, saw_comma = false;
    while (true) {
      SkipSpace();
      if (Eat(')')) break;
      if (need_sep) {
        if (!Eat(',')) return Error("expected ',' in the shape");
        saw_comma = true;
        need_sep = false;
        continue;
      }
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9')
        return Error("shape entries must be non-negative integers");
      int64_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        v = v * 10 + (s_[pos_++] - '0');
        if (v > kMaxElements) return Error("shape dimension is too large");
      }
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 long suffix
      shape->push_back(v);
      if (shape->size() > 32) return Error("more than 32 dimensions");
      need_sep = true;
    }
    // "(3)" is an int in Python, not a 1-tuple.
    if (shape->size() == 1 && !saw_comma) return Error("shape '(n)' is not a tuple; expected '(n,)'");
    return absl::OkStatus();
  }

  std::string_view s_;
  std::string_view what_;
  size_t pos_ = 0;
};

}  // namespace

const char* ElementTypeName(ElementType t) {
  switch (t) {
    case ElementType::kFloat32: return "float32";
    case ElementType::kFloat16: return "float16";
    case ElementType::kInt32: return "int32";
    case ElementType::kInt64: return "int64";
    case ElementType::kBool: return "bool";
    case ElementType::kUint8: return "uint8";
    case ElementType::kInt8: return "int8";
    case ElementType::kInt16: return "int16";
  }
  return "invalid";
}

const char* ElementTypeDescr(ElementType t) {
  switch (t) {
    case ElementType::kFloat32: return "<f4";
    case ElementType::kFloat16: return "<f2";
    case ElementType::kInt32: return "<i4";
    case ElementType::kInt64: return "<i8";
    case ElementType::kBool: return "|b1";
    case ElementType::kUint8: return "|u1";
    case ElementType::kInt8: return "|i1";
    case ElementType::kInt16: return "<i2";
  }
  return "";
}

size_t ElementSize(ElementType t) {
  switch (t) {
    case ElementType::kFloat32: return 4;
    case ElementType::kFloat16: return 2;
    case ElementType::kInt32: return 4;
    case ElementType::kInt64: return 8;
    case ElementType::kBool: return 1;
    case ElementType::kUint8: return 1;
    case ElementType::kInt8: return 1;
    case ElementType::kInt16: return 2;
  }
  return 0;
}

bool IsInteger(ElementType t) {
  return t == ElementType::kInt32 || t == ElementType::kInt64 || t == ElementType::kUint8 || t == ElementType::kInt8 ||
         t == ElementType::kInt16;
}

int64_t Array::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&s, i ? ", " : "", shape[i]);
  if (shape.size() == 1) s += ",";
  return s + ")";
}

absl::StatusOr<Array> Parse(std::string_view bytes, std::string_view what_view) {
  std::string what(what_view);
  auto bad = [&](std::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", std::string(msg)));
  };
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic)
    return bad("not a .npy file (missing the \\x93NUMPY magic)");
  uint8_t major = uint8_t(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad("truncated .npy preamble");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= size_t(uint8_t(bytes[size_t(8 + i)])) << (8 * i);
    header_start = 12;
  } else {
    return bad(absl::StrCat("unsupported .npy format version ", int(major), ".",
                            int(uint8_t(bytes[7]))));
  }
  if (header_len > bytes.size() - header_start)
    return bad(absl::StrCat("header length ", header_len, " runs past the end of the ",
                            bytes.size(), "-byte file (truncated?)"));
  std::string_view header = bytes.substr(header_start, header_len);
  if (major < 3) {
    for (char c : header)
      if (uint8_t(c) >= 0x80) return bad("non-ASCII character in a version 1/2 header");
  }
  std::string descr;
  bool fortran = false;
  Array a;
  if (absl::Status st = HeaderParser(header, what).Parse(&descr, &fortran, &a.shape); !st.ok())
    return st;
  static constexpr ElementType kTypes[] = {ElementType::kFloat32, ElementType::kFloat16, ElementType::kInt32,
                                            ElementType::kInt64,   ElementType::kInt16,   ElementType::kInt8,
                                            ElementType::kUint8,   ElementType::kBool};
  const ElementType* known = std::find_if(std::begin(kTypes), std::end(kTypes),
                                          [&](ElementType t) { return descr == ElementTypeDescr(t); });
  if (known != std::end(kTypes)) {
    a.type = *known;
  } else if (descr == "<f8") {
    return bad("dtype is float64 ('<f8'); save the array with .astype(numpy.float32)");
  } else if (descr.size() == 3 && descr[0] == '>' &&
             std::any_of(std::begin(kTypes), std::end(kTypes), [&](ElementType t) {
               return ElementTypeDescr(t)[0] == '<' && descr.compare(1, 2, ElementTypeDescr(t) + 1) == 0;
             })) {
    return bad(absl::StrCat("dtype '", descr, "' is big-endian; save a little-endian array"));
  } else {
    std::string supported;
    for (ElementType t : kTypes)
      absl::StrAppend(&supported, supported.empty() ? "" : ", ", "'", ElementTypeDescr(t), "' ", ElementTypeName(t));
    return bad(absl::StrCat("unsupported dtype '", descr, "' (supported: ", supported, ")"));
  }
  if (fortran) return bad("fortran_order is True; save a C-ordered array (numpy.ascontiguousarray)");
  int64_t n = 1;
  for (int64_t d : a.shape) {
    if (d != 0 && n > kMaxElements / d) return bad("shape has too many elements");
    n *= d;
  }
  uint64_t need = uint64_t(n) * ElementSize(a.type);
  uint64_t have = bytes.size() - header_start - header_len;
  if (have != need)
    return bad(absl::StrCat("shape ", ShapeString(a.shape), " of ", ElementTypeName(a.type),
                            " needs ", need, " data bytes but the file has ", have,
                            have < need ? " (truncated)" : " (trailing bytes)"));
  a.data = std::string(bytes.substr(header_start + header_len));
  return a;
}

absl::StatusOr<Array> ReadFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = files::ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  return Parse(*bytes, path);
}

std::string Serialize(const Array& array) {
  std::string dict = absl::StrCat("{'descr': '", ElementTypeDescr(array.type),
                                  "', 'fortran_order': False, 'shape': ", ShapeString(array.shape),
                                  ", }");
  // Pad with spaces and a final newline so magic + length + header is a
  // multiple of 64 bytes.
  size_t prefix = 10;
  size_t total = prefix + dict.size() + 1;
  bool v2 = false;
  size_t padded = (total + 63) / 64 * 64;
  if (padded - prefix > 65535) {
    v2 = true;
    prefix = 12;
    total = prefix + dict.size() + 1;
    padded = (total + 63) / 64 * 64;
  }
  size_t header_len = padded - prefix;
  dict.append(header_len - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string out(kMagic);
  out.push_back(char(v2 ? 2 : 1));
  out.push_back(0);
  for (int i = 0; i < (v2 ? 4 : 2); ++i) out.push_back(char((header_len >> (8 * i)) & 0xff));
  out += dict;
  out += array.data;
  return out;
}

absl::Status WriteFileAtomic(const std::string& path, const Array& array) {
  return files::WriteFileAtomic(path, Serialize(array));
}

}  // namespace neuroncc::npy
