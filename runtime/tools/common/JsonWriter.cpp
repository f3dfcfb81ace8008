//===- JsonWriter.cpp - Valid JSON for the runtime tools ------------------===//
#include "common/JsonWriter.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace mlart::tool {
namespace {

bool isContinuation(unsigned char c) { return (c & 0xc0) == 0x80; }

/// The length of the well-formed UTF-8 sequence at `text[i]`, or 0 (a
/// stray byte, an overlong form, a surrogate, past U+10FFFF).
size_t utf8Length(std::string_view text, size_t i) {
  const auto at = [&](size_t k) {
    return static_cast<unsigned char>(text[i + k]);
  };
  const unsigned char c = at(0);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf; // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    lo = c == 0xe0 ? 0xa0 : 0x80;
    hi = c == 0xed ? 0x9f : 0xbf;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    lo = c == 0xf0 ? 0x90 : 0x80;
    hi = c == 0xf4 ? 0x8f : 0xbf;
  } else {
    return 0;
  }
  if (i + n > text.size() || at(1) < lo || at(1) > hi)
    return 0;
  for (size_t k = 2; k < n; ++k)
    if (!isContinuation(at(k)))
      return 0;
  return n;
}

} // namespace

void JsonWriter::appendEscaped(std::string_view text) {
  out_ += '"';
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t n = utf8Length(text, i);
      if (n == 0) {
        out_ += "\\ufffd"; // JSON text must be Unicode
        ++i;
      } else {
        out_.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    ++i;
    switch (c) {
    case '"':
      out_ += "\\\"";
      break;
    case '\\':
      out_ += "\\\\";
      break;
    case '\b':
      out_ += "\\b";
      break;
    case '\f':
      out_ += "\\f";
      break;
    case '\n':
      out_ += "\\n";
      break;
    case '\r':
      out_ += "\\r";
      break;
    case '\t':
      out_ += "\\t";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out_ += buf;
      } else {
        out_ += char(c);
      }
    }
  }
  out_ += '"';
}

void JsonWriter::newline(size_t depth) {
  out_ += '\n';
  out_.append(2 * depth, ' ');
}

bool JsonWriter::beginValue() {
  if (failed_)
    return false;
  if (stack_.empty()) {
    failed_ = done_; // a second top-level value
    return !failed_;
  }
  Level &level = stack_.back();
  if (level.object) {
    // The separator came with the key.
    failed_ = !level.keyPending;
    level.keyPending = false;
    return !failed_;
  }
  const bool lined = int(stack_.size()) - 1 < lineDepth_;
  if (!level.empty)
    out_ += lined ? "," : ", ";
  if (lined)
    newline(stack_.size());
  level.empty = false;
  return true;
}

void JsonWriter::key(std::string_view name) {
  if (failed_ || stack_.empty() || !stack_.back().object ||
      stack_.back().keyPending) {
    failed_ = true;
    return;
  }
  Level &level = stack_.back();
  const bool lined = int(stack_.size()) - 1 < lineDepth_;
  if (!level.empty)
    out_ += lined ? "," : ", ";
  if (lined)
    newline(stack_.size());
  level.empty = false;
  appendEscaped(name);
  out_ += ": ";
  level.keyPending = true;
}

void JsonWriter::beginObject() {
  if (!beginValue())
    return;
  out_ += '{';
  stack_.push_back({/*object=*/true});
}

void JsonWriter::beginArray() {
  if (!beginValue())
    return;
  out_ += '[';
  stack_.push_back({/*object=*/false});
}

void JsonWriter::end(bool object) {
  if (failed_)
    return;
  if (stack_.empty() || stack_.back().object != object ||
      stack_.back().keyPending) {
    failed_ = true;
    return;
  }
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty && int(stack_.size()) < lineDepth_)
    newline(stack_.size());
  out_ += object ? '}' : ']';
  done_ = stack_.empty();
}

void JsonWriter::endObject() { end(/*object=*/true); }
void JsonWriter::endArray() { end(/*object=*/false); }

void JsonWriter::string(std::string_view value) {
  if (!beginValue())
    return;
  appendEscaped(value);
  done_ = stack_.empty();
}

void JsonWriter::integer(int64_t value) {
  if (!beginValue())
    return;
  out_ += std::to_string(value);
  done_ = stack_.empty();
}

void JsonWriter::number(double value, NumberFormat format) {
  if (!std::isfinite(value)) {
    null();
    return;
  }
  if (!beginValue())
    return;
  // %.Nf of 1e308 has 309 digits before the point.
  char buf[512];
  const int digits = format.digits < 0    ? 0
                     : format.digits > 40 ? 40
                                          : format.digits;
  switch (format.style) {
  case NumberFormat::Style::Shortest: {
    const std::to_chars_result r =
        std::to_chars(buf, buf + sizeof(buf) - 1, value);
    *r.ptr = '\0';
    break;
  }
  case NumberFormat::Style::Fixed:
    std::snprintf(buf, sizeof(buf), "%.*f", digits, value);
    break;
  case NumberFormat::Style::Scientific:
    std::snprintf(buf, sizeof(buf), "%.*e", digits, value);
    break;
  }
  out_ += buf;
  done_ = stack_.empty();
}

void JsonWriter::boolean(bool value) {
  if (!beginValue())
    return;
  out_ += value ? "true" : "false";
  done_ = stack_.empty();
}

void JsonWriter::null() {
  if (!beginValue())
    return;
  out_ += "null";
  done_ = stack_.empty();
}

} // namespace mlart::tool
