//===- JsonWriterTest.cpp - The runtime tools' JSON writer ----------------===//
//
// runtime/tools/common/JsonWriter.cpp: the documents it writes, character
// for character: escaping, numbers (non-finite ones as null), both
// layouts, and misuse that must not produce a document.
//
//===----------------------------------------------------------------------===//
#include "common/JsonWriter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace mlart::tool;

namespace {

std::string quoted(std::string_view s) {
  JsonWriter w;
  w.string(s);
  EXPECT_TRUE(w.complete());
  return w.str();
}

TEST(JsonWriter, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(quoted("plain"), "\"plain\"");
  EXPECT_EQ(quoted("a\"b"), "\"a\\\"b\"");
  EXPECT_EQ(quoted("a\\b"), "\"a\\\\b\"");
  EXPECT_EQ(quoted("line\nnext"), "\"line\\nnext\"");
  EXPECT_EQ(quoted("\t\r\b\f"), "\"\\t\\r\\b\\f\"");
  EXPECT_EQ(quoted("\x01"), "\"\\u0001\"");
  EXPECT_EQ(quoted("\x1f"), "\"\\u001f\"");
  EXPECT_EQ(quoted(std::string_view("a\0b", 3)), "\"a\\u0000b\"");
  EXPECT_EQ(quoted("/"), "\"/\""); // needs no escape
}

TEST(JsonWriter, Utf8PassesInvalidBytesDoNot) {
  EXPECT_EQ(quoted("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  EXPECT_EQ(quoted("a\xff"
                   "b"),
            "\"a\\ufffdb\"");
  EXPECT_EQ(quoted("\xc3"), "\"\\ufffd\"");                       // cut short
  EXPECT_EQ(quoted("\xc0\xaf"), "\"\\ufffd\\ufffd\"");            // overlong
  EXPECT_EQ(quoted("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\""); // surrogate
}

TEST(JsonWriter, NonFiniteNumbersAreNull) {
  JsonWriter w;
  w.beginArray();
  w.number(std::numeric_limits<double>::quiet_NaN());
  w.number(std::numeric_limits<double>::infinity());
  w.number(-std::numeric_limits<double>::infinity(),
           NumberFormat::scientific(3));
  w.number(1.5);
  w.endArray();
  EXPECT_TRUE(w.complete());
  EXPECT_EQ(w.str(), "[null, null, null, 1.5]");
}

TEST(JsonWriter, NumberFormats) {
  JsonWriter w;
  w.beginArray();
  w.number(0.1);
  w.number(2.0);
  w.number(1e300);
  w.number(3.14159, NumberFormat::fixed(4));
  w.number(0.000123456, NumberFormat::scientific(3));
  w.number(1e308, NumberFormat::fixed(1));
  w.integer(-42);
  w.integer(std::numeric_limits<int64_t>::max());
  w.endArray();
  ASSERT_TRUE(w.complete());
  EXPECT_EQ(w.str().substr(0, 44),
            "[0.1, 2, 1e+300, 3.1416, 1.235e-04, 10000000");
  EXPECT_NE(w.str().find(".0, -42, 9223372036854775807]"), std::string::npos);
}

TEST(JsonWriter, OneLineLayout) {
  JsonWriter w;
  w.beginObject();
  w.member("name", "a \"b\"");
  w.memberInt("steps", 3);
  w.memberBool("ok", true);
  w.key("none");
  w.null();
  w.key("list");
  w.beginArray();
  w.beginObject();
  w.endObject();
  w.beginArray();
  w.endArray();
  w.boolean(false);
  w.endArray();
  w.endObject();
  ASSERT_TRUE(w.complete());
  EXPECT_EQ(w.str(), "{\"name\": \"a \\\"b\\\"\", \"steps\": 3, \"ok\": true, "
                     "\"none\": null, \"list\": [{}, [], false]}");
}

TEST(JsonWriter, LinesUpToADepth) {
  JsonWriter w(/*lineDepth=*/2);
  w.beginObject();
  w.member("device", "x");
  w.key("rows");
  w.beginArray();
  for (int i = 0; i < 2; ++i) {
    w.beginObject();
    w.memberInt("i", i);
    w.memberInt("j", i);
    w.endObject();
  }
  w.endArray();
  w.key("empty");
  w.beginArray();
  w.endArray();
  w.endObject();
  ASSERT_TRUE(w.complete());
  EXPECT_EQ(w.str(), "{\n"
                     "  \"device\": \"x\",\n"
                     "  \"rows\": [\n"
                     "    {\"i\": 0, \"j\": 0},\n"
                     "    {\"i\": 1, \"j\": 1}\n"
                     "  ],\n"
                     "  \"empty\": []\n"
                     "}");
}

TEST(JsonWriter, KeysAreEscaped) {
  JsonWriter w;
  w.beginObject();
  w.memberInt("a\"\n", 1);
  w.endObject();
  EXPECT_EQ(w.str(), "{\"a\\\"\\n\": 1}");
}

TEST(JsonWriter, MisuseFails) {
  {
    JsonWriter w; // a value without a key
    w.beginObject();
    w.integer(1);
    EXPECT_FALSE(w.ok());
  }
  {
    JsonWriter w; // a key in an array
    w.beginArray();
    w.key("a");
    EXPECT_FALSE(w.ok());
  }
  {
    JsonWriter w; // two keys in a row
    w.beginObject();
    w.key("a");
    w.key("b");
    EXPECT_FALSE(w.ok());
  }
  {
    JsonWriter w; // the wrong bracket
    w.beginObject();
    w.endArray();
    EXPECT_FALSE(w.ok());
  }
  {
    JsonWriter w; // a key without its value
    w.beginObject();
    w.key("a");
    w.endObject();
    EXPECT_FALSE(w.ok());
  }
  {
    JsonWriter w; // two documents
    w.integer(1);
    EXPECT_TRUE(w.complete());
    w.integer(2);
    EXPECT_FALSE(w.ok());
  }
  {
    JsonWriter w; // not finished
    w.beginArray();
    EXPECT_TRUE(w.ok());
    EXPECT_FALSE(w.complete());
  }
}

} // namespace
