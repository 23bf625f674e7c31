// Minimal JSON text helpers shared by the runtime's trace writer and the
// tools. Header-only, no dependencies: output is built with string appends.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

namespace neuroncc::json {

// A JSON string literal, quotes included, with every control character escaped.
inline std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
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
          out += ch;
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
