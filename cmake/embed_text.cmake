# cmake -DINPUT=file -DOUTPUT=file.cpp -DHEADER=serve/x.h -DNAMESPACE=weft::serve -DFUNCTION=name -P embed_text.cmake
# Writes a .cpp whose FUNCTION() returns INPUT's bytes (a raw string literal): a text file built
# into the binary, rewritten whenever the file changes.
file(READ "${INPUT}" text)
set(delim "weft_embed")
string(FIND "${text}" ")${delim}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains )${delim}\", the raw string's end")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/embed_text.cmake; edit that file instead.\n"
  "#include \"${HEADER}\"\n\n"
  "namespace ${NAMESPACE} {\n\n"
  "std::string_view ${FUNCTION}() {\n"
  "  static constexpr char kText[] = R\"${delim}(${text})${delim}\";\n"
  "  return {kText, sizeof kText - 1};\n"
  "}\n\n"
  "}  // namespace ${NAMESPACE}\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
