// Minimal JSON text helpers shared by the runtime's trace writer and the
// tools. Header-only, no dependencies: output is built with string appends.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

namespace neuroncc::json {

// Length of the well-formed UTF-8 sequence starting at s[i] (1 to 4), or 0
// if the bytes there are not one (overlong forms, surrogates and code points
// above U+10FFFF included). Small enough not to warrant a library: Abseil
// and the standard library have no public UTF-8 validator.
inline size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  auto cont = [&](size_t k) { return (byte(k) & 0xC0u) == 0x80u; };
  unsigned c = byte(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    unsigned c1 = byte(1);
    bool ok = cont(1) && cont(2) && !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    return ok ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    unsigned c1 = byte(1);
    bool ok = cont(1) && cont(2) && cont(3) && !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    return ok ? 4 : 0;
  }
  return 0;
}

inline bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// A JSON string literal, quotes included, with every control character
// escaped and each byte that is not part of well-formed UTF-8 written as
// U+FFFD, so that any bytes give valid JSON.
inline std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    unsigned char c = static_cast<unsigned char>(s[i++]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

// A finite number with up to `digits` decimals, trailing zeros trimmed
// (JSON has no NaN/Inf: those become null).
inline std::string Number(double v, int digits = 6) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

}  // namespace neuroncc::json
