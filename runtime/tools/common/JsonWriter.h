//===- JsonWriter.h - Valid JSON for the runtime tools ----------*- C++ -*-===//
//
// The runtime's tools link no LLVM (no llvm::json): this writer builds their
// JSON documents (mla-run --json, mla-bench's results file) into a string.
// Strings are escaped (quotes, backslashes, control characters as \u00XX,
// invalid UTF-8 as U+FFFD), non-finite numbers become null (JSON has no
// NaN), and misuse (a value where a key belongs, a container closed twice)
// marks the writer failed instead of producing a broken document.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_TOOLS_JSONWRITER_H
#define MLART_TOOLS_JSONWRITER_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mlart::tool {

/// How a double is written: the shortest text that reads back the same
/// value, or printf's %.Nf / %.Ne (the tools' established precision).
struct NumberFormat {
  enum class Style { Shortest, Fixed, Scientific };
  Style style = Style::Shortest;
  int digits = 0;

  static NumberFormat fixed(int digits) { return {Style::Fixed, digits}; }
  static NumberFormat scientific(int digits) {
    return {Style::Scientific, digits};
  }
};

class JsonWriter {
public:
  /// Elements of containers nested less than `lineDepth` deep go on lines
  /// of their own, indented by two spaces a level; deeper ones, and all with
  /// the default 0, on one line as {"a": 1, "b": [2, 3]}.
  explicit JsonWriter(int lineDepth = 0) : lineDepth_(lineDepth) {}

  void beginObject();
  void endObject();
  void beginArray();
  void endArray();
  /// The next member's key (inside an object, before each value).
  void key(std::string_view name);

  void string(std::string_view value);
  void integer(int64_t value);
  void number(double value, NumberFormat format = {});
  void boolean(bool value);
  void null();

  // key() and a value in one call.
  void member(std::string_view name, std::string_view value) {
    key(name);
    string(value);
  }
  void member(std::string_view name, const char *value) {
    key(name);
    string(value);
  }
  void memberInt(std::string_view name, int64_t value) {
    key(name);
    integer(value);
  }
  void memberNumber(std::string_view name, double value,
                    NumberFormat format = {}) {
    key(name);
    number(value, format);
  }
  void memberBool(std::string_view name, bool value) {
    key(name);
    boolean(value);
  }

  /// No misuse so far.
  bool ok() const { return !failed_; }
  /// One whole value written, every container closed, no misuse.
  bool complete() const { return ok() && done_ && stack_.empty(); }
  /// The document so far.
  const std::string &str() const { return out_; }

private:
  struct Level {
    bool object;
    bool empty = true;
    bool keyPending = false; ///< objects: key() written, its value not yet
  };

  /// Before any value: the separator and indentation, or failure when a
  /// value is not allowed here.
  bool beginValue();
  void end(bool object);
  void newline(size_t depth);
  void appendEscaped(std::string_view text);

  std::string out_;
  std::vector<Level> stack_;
  int lineDepth_;
  bool done_ = false;
  bool failed_ = false;
};

} // namespace mlart::tool

#endif // MLART_TOOLS_JSONWRITER_H
