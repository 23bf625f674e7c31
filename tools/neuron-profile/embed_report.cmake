# Writes report.html into a C++ source as one raw string literal (run at
# build time: cmake -DIN=report.html -DOUT=report_template.cc -P this file).
file(READ "${IN}" content)
string(FIND "${content}" ")NCCHTML\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string delimiter )NCCHTML\"")
endif()
file(WRITE "${OUT}.tmp" "// Generated from report.html by embed_report.cmake; do not edit.\nnamespace neuroncc::profile {\nextern const char kReportTemplate[];\nconst char kReportTemplate[] = R\"NCCHTML(${content})NCCHTML\";\n}  // namespace neuroncc::profile\n")
file(RENAME "${OUT}.tmp" "${OUT}")
